use super::Merge;
use crate::convergence::Revisions;
use crate::snapshot::SnapshotUpdate;
use shoal_proto::change::ChangeSet;
use shoal_proto::push_context::PushContext;
use std::sync::Arc;
use std::time::SystemTime;

/// A push for one connection: a [`SnapshotUpdate`] whose change set is shared, so
/// enqueueing one update for thousands of connections copies a pointer, not the set.
/// Not `Clone`: each connection's copy carries its own [`Revisions`] to settle
/// ([`PushEvent::tracked`]).
#[derive(Debug)]
pub struct PushEvent {
    pub push: Arc<PushContext>,
    pub changes: Arc<ChangeSet>,
    /// The config revisions this push answers for, on this connection.
    pub revisions: Revisions,
}

impl PushEvent {
    /// A push no revision waits on.
    pub fn new(push: Arc<PushContext>, changes: Arc<ChangeSet>) -> Self {
        PushEvent {
            push,
            changes,
            revisions: Revisions::none(),
        }
    }

    /// This push for one connection, answering for `revisions`.
    pub fn tracked(&self, revisions: Revisions) -> Self {
        PushEvent {
            push: self.push.clone(),
            changes: self.changes.clone(),
            revisions,
        }
    }

    /// False when only endpoints changed (EDS push).
    pub fn full(&self) -> bool {
        self.changes.full
    }

    /// When the earliest change included happened (for convergence time).
    pub fn start(&self) -> SystemTime {
        self.changes.start()
    }
}

impl From<SnapshotUpdate> for PushEvent {
    fn from(u: SnapshotUpdate) -> Self {
        PushEvent::new(u.push, Arc::new(u.changes))
    }
}

impl Merge for PushEvent {
    /// [`ChangeSet::merge`] with the latest push context; the shared set is copied only
    /// when two different updates meet.
    fn merge(self, newer: Self) -> Self {
        let changes = if Arc::ptr_eq(&self.changes, &newer.changes) {
            newer.changes
        } else {
            Arc::new(Arc::unwrap_or_clone(self.changes).merge(Arc::unwrap_or_clone(newer.changes)))
        };
        PushEvent {
            push: if newer.push.version() >= self.push.version() {
                newer.push
            } else {
                self.push
            },
            changes,
            revisions: self.revisions.merge(newer.revisions),
        }
    }
}
