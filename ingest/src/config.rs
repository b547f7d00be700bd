//! What an ingest is told to do.

use crate::debounce::DebounceConfig;
use crate::retry::RetryConfig;
use std::path::PathBuf;
use std::time::Duration;

/// The ingest's settings. [`IngestConfig::new`] fills in Istio's defaults.
#[derive(Clone, Debug)]
pub struct IngestConfig {
    /// The directory of YAML files to serve (read recursively).
    pub config_dir: PathBuf,
    /// This ingest's cluster: stamped on every object and prefixed to its KV keys.
    pub cluster_id: String,
    /// This cluster's network: labelled (`topology.istio.io/network`) on Pods and
    /// WorkloadEntries that do not name one. Empty: none.
    pub network: String,
    /// Quiet period before a push, from when the source saw the last change
    /// (`SHOAL_DEBOUNCE_AFTER`, Istio's 100 ms).
    pub debounce_after: Duration,
    /// Longest a push waits under a steady stream of events (`SHOAL_DEBOUNCE_MAX`, 10 s).
    pub debounce_max: Duration,
    /// Debounce endpoint-only pushes too (Istio's `PILOT_ENABLE_EDS_DEBOUNCE`, on).
    pub eds_debounce: bool,
    /// A burst of file events ends after this long without one (20 ms).
    pub file_coalesce: Duration,
    /// Full rescan period, in case a file event was missed (60 s); zero disables it.
    pub resync_interval: Duration,
    /// Bound of the queue of store changes waiting for their KV write.
    pub change_queue: usize,
    /// KV writes in flight at once while no push waits on them (the initial load).
    pub kv_pipeline: usize,
    /// Bound of the queue of push requests waiting for the debouncer.
    pub push_queue: usize,
    /// Bound of the file event signals queued between batches; overflow rescans.
    pub watch_queue: usize,
    /// Backoff for KV and bus calls while they are unavailable.
    pub retry: RetryConfig,
    /// Istio's system namespace (`SHOAL_SYSTEM_NAMESPACE`): the only one whose mesh
    /// config (ConfigMap `istio`) is read, as istiod reads it.
    pub system_namespace: String,
}

impl IngestConfig {
    pub fn new(config_dir: impl Into<PathBuf>, cluster_id: impl Into<String>) -> Self {
        Self {
            config_dir: config_dir.into(),
            cluster_id: cluster_id.into(),
            network: String::new(),
            debounce_after: Duration::from_millis(100),
            debounce_max: Duration::from_secs(10),
            eds_debounce: true,
            file_coalesce: Duration::from_millis(20),
            resync_interval: Duration::from_secs(60),
            change_queue: 1024,
            kv_pipeline: 64,
            push_queue: 1024,
            watch_queue: 4096,
            retry: RetryConfig::default(),
            system_namespace: "istio-system".into(),
        }
    }

    pub(crate) fn debounce(&self) -> DebounceConfig {
        DebounceConfig {
            after: self.debounce_after,
            max: self.debounce_max,
            eds: self.eds_debounce,
        }
    }
}
