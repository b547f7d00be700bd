//! Start-up reconciliation: which of a source's KV keys the loaded config no longer
//! holds, and the KV's latest revision for the first full push.

use shoal_proto::config::{ConfigKey, Origin};
use shoal_proto::transport::{KvEntry, parse_config_kv_key, parse_legacy_config_kv_key};

/// What to do with a source's KV keys after the initial load.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Keys no file defines any more: delete.
    pub delete: Vec<ConfigKey>,
    /// Keys the store lacks but that may still be defined by a file that fails to parse:
    /// their earlier value stays.
    pub keep: Vec<ConfigKey>,
    /// Keys of this cluster in the format before sources owned keys
    /// (`<cluster>.<kind>.<ns>.<name>`): delete, once, as they are.
    pub delete_legacy: Vec<String>,
    /// The highest revision among the entries.
    pub latest: u64,
}

/// Plans the reconciliation of `entries` (the whole bucket) for the source of `origin`:
/// keys of other clusters and other sources are never touched.
pub(crate) fn plan(
    entries: &[KvEntry],
    origin: &Origin,
    in_store: impl Fn(&ConfigKey) -> bool,
    protected: impl Fn(&ConfigKey) -> bool,
) -> Plan {
    let mut plan = Plan::default();
    for entry in entries {
        plan.latest = plan.latest.max(entry.revision);
        if entry.value.is_none() {
            continue;
        }
        let Some((owner, key)) = parse_config_kv_key(&entry.key) else {
            if parse_legacy_config_kv_key(&entry.key).is_some_and(|(c, _)| c == origin.cluster) {
                plan.delete_legacy.push(entry.key.clone());
            }
            continue;
        };
        if !owner.is(origin) || in_store(&key) {
            continue;
        }
        if protected(&key) {
            plan.keep.push(key);
        } else {
            plan.delete.push(key);
        }
    }
    plan
}
