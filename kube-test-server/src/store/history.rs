use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::Value;

use super::{ObjectKey, StoreError};
use crate::resource::GroupResource;

/// How many changes a server keeps for watch replay unless told otherwise.
pub const DEFAULT_HISTORY_CAPACITY: usize = 10_000;

/// What a write did: an object was added, modified or deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One committed write, as the history keeps it and watches receive it.
#[derive(Debug, PartialEq)]
pub struct Change {
    pub revision: u64,
    pub resource: GroupResource,
    pub key: ObjectKey,
    pub kind: ChangeKind,
    /// The object after the write; for a delete, its last state stamped with `revision`.
    pub object: Arc<Value>,
    /// The object before the write: lets a filtered watch tell "stopped matching" from
    /// "never matched", and lets a list page undo later writes to its snapshot.
    pub previous: Option<Arc<Value>>,
}

/// The last changes, oldest first, at most `capacity` of them.
#[derive(Debug)]
pub struct History {
    changes: VecDeque<Arc<Change>>,
    capacity: usize,
    /// Every change after this revision is retained; those at or before it may not be.
    floor: u64,
}

impl History {
    pub fn new(capacity: usize) -> Self {
        Self {
            changes: VecDeque::new(),
            capacity: capacity.max(1),
            floor: 0,
        }
    }

    pub fn push(&mut self, change: Arc<Change>) {
        if self.changes.len() == self.capacity
            && let Some(dropped) = self.changes.pop_front()
        {
            self.floor = dropped.revision;
        }
        self.changes.push_back(change);
    }

    /// Drops every change up to `revision` (the current one).
    pub fn compact(&mut self, revision: u64) {
        self.changes.clear();
        self.floor = self.floor.max(revision);
    }

    /// The changes after `revision`, or `Expired` when some are gone.
    pub fn since(
        &self,
        revision: u64,
    ) -> Result<impl DoubleEndedIterator<Item = &Arc<Change>>, StoreError> {
        if revision < self.floor {
            return Err(StoreError::Expired {
                requested: revision,
                oldest: self.floor,
            });
        }
        let first = self
            .changes
            .partition_point(|change| change.revision <= revision);
        Ok(self.changes.range(first..))
    }
}
