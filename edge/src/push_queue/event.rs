use super::Merge;
use crate::snapshot::SnapshotUpdate;
use shoal_proto::config::ConfigKey;
use shoal_proto::push_context::PushContext;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::SystemTime;

/// A push for one connection: a [`SnapshotUpdate`] whose key set is shared, so enqueueing
/// one update for thousands of connections copies a pointer, not the set.
#[derive(Clone, Debug)]
pub struct PushEvent {
    pub push: Arc<PushContext>,
    /// False when only endpoints changed (EDS push).
    pub full: bool,
    /// Empty means everything.
    pub configs_updated: Arc<BTreeSet<ConfigKey>>,
    /// When the earliest change included happened (for convergence time).
    pub start: SystemTime,
}

impl From<SnapshotUpdate> for PushEvent {
    fn from(u: SnapshotUpdate) -> Self {
        PushEvent {
            push: u.push,
            full: u.full,
            configs_updated: Arc::new(u.configs_updated),
            start: u.start,
        }
    }
}

impl Merge for PushEvent {
    /// Istio's merge: `full` if either is, the earliest start, the latest push context, and
    /// the union of the changed configs unless either is empty (= everything).
    fn merge(self, newer: Self) -> Self {
        let configs_updated = if self.configs_updated.is_empty() {
            self.configs_updated
        } else if newer.configs_updated.is_empty()
            || Arc::ptr_eq(&self.configs_updated, &newer.configs_updated)
        {
            newer.configs_updated
        } else {
            let mut union = (*self.configs_updated).clone();
            union.extend(newer.configs_updated.iter().cloned());
            Arc::new(union)
        };
        PushEvent {
            push: if newer.push.version() >= self.push.version() {
                newer.push
            } else {
                self.push
            },
            full: self.full || newer.full,
            configs_updated,
            start: self.start.min(newer.start),
        }
    }
}
