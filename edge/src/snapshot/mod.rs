//! Snapshot pull: follows `shoal.snapshot` (and `shoal:latest` on start and reconnect),
//! fetches only the chunks it does not hold, and swaps the PushContext atomically.

use shoal_proto::config::ConfigKey;
use shoal_proto::push_context::PushContext;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::SystemTime;

/// A new snapshot, and what changed since the previous one, for the push dispatcher.
#[derive(Clone, Debug)]
pub struct SnapshotUpdate {
    pub push: Arc<PushContext>,
    /// False when only endpoints changed (EDS push).
    pub full: bool,
    /// Empty means everything. Services and endpoints are `ServiceEntry ns/hostname`.
    pub configs_updated: BTreeSet<ConfigKey>,
    /// When the earliest change included happened (for convergence time).
    pub start: SystemTime,
}

mod diff;
mod puller;

pub use diff::namespace_changes;

pub use puller::{PullError, PullerConfig, SnapshotPuller};
