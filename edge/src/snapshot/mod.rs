//! Snapshot pull: follows `shoal.snapshot` (and `shoal:latest` on start and reconnect),
//! fetches the root manifest, only the pages and then the chunks it does not hold, and
//! swaps the PushContext atomically.

use shoal_proto::change::ChangeSet;
use shoal_proto::push_context::PushContext;
use std::sync::Arc;

/// A new snapshot, and what changed since the previous one, for the push dispatcher.
#[derive(Clone, Debug)]
pub struct SnapshotUpdate {
    pub push: Arc<PushContext>,
    /// Relative to the snapshot served before; its start is the earliest change included
    /// (for convergence time).
    pub changes: ChangeSet,
}

mod held;
mod puller;

pub use puller::{PullError, PullerConfig, SnapshotPuller};

#[cfg(test)]
mod tests;
