//! `PushRequest`: what ingest publishes on `shoal.push` — a [`ChangeSet`] and the config
//! revision it covers.

use crate::change::{ChangeSet, TriggerReason};
use crate::config::ConfigKey;
use serde::{Deserialize, Serialize};
use std::time::SystemTime;

pub use crate::change::unix_nanos;

/// A request to push, as ingest publishes it on `shoal.push`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushRequest {
    pub changes: ChangeSet,
    /// The config revision this request covers: builders read at least this revision.
    pub revision: u64,
}

impl PushRequest {
    /// The request one config event makes: full unless the kind only moves endpoints.
    pub fn for_change(key: ConfigKey, revision: u64, at: SystemTime) -> Self {
        Self {
            changes: ChangeSet::for_config(key, at),
            revision,
        }
    }

    /// A full push of everything (start-up, resync).
    pub fn full_everything(reason: TriggerReason, revision: u64, at: SystemTime) -> Self {
        Self {
            changes: ChangeSet::everything(reason, at),
            revision,
        }
    }

    /// [`ChangeSet::merge`], keeping the latest revision.
    pub fn merge(self, other: PushRequest) -> PushRequest {
        PushRequest {
            changes: self.changes.merge(other.changes),
            revision: self.revision.max(other.revision),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Kind;

    #[test]
    fn merge_keeps_the_latest_revision() {
        let now = SystemTime::now();
        let a = PushRequest::for_change(ConfigKey::new(Kind::VirtualService, "n", "a"), 5, now);
        let b = PushRequest::for_change(ConfigKey::new(Kind::VirtualService, "n", "b"), 3, now);
        assert_eq!(a.merge(b).revision, 5);
    }
}
