//! The directory registry: YAML files under a directory, kept in a [`ConfigStore`].
//!
//! ```text
//!  notify ──► watch (coalesced batches) ──► scan::resolve ──► scan::read + parse
//!      ──► Index (per-file objects, last write wins, rejected objects keep their
//!          earlier version) ──► ConfigStore::apply / delete ──► handler ──► KV sync
//! ```
//!
//! Start-up: the watch starts first (so no change is missed), the directory is loaded,
//! the store is marked synced, then this cluster's KV keys that no file defines are
//! deleted and one full push is sent at the KV's latest revision.

mod index;
mod rejections;
mod scan;
mod watch;

pub use rejections::{Rejection, Rejections};

use crate::metrics::{KindLabel, Metrics};
use crate::retry::{RetryConfig, retry};
use crate::sync::{self, Change, EventBuffer, SyncError, WriterHandle};
use index::{FileRead, Index};
use shoal_infra::admin::Readiness;
use shoal_proto::change::TriggerReason;
use shoal_proto::config::{Config, ConfigKey, Kind};
use shoal_proto::push::PushRequest;
use shoal_proto::store::ConfigStore;
use shoal_proto::transport::ConfigKv;
use std::collections::BTreeSet;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;
use watch::DirWatcher;

/// The label Istio reads an endpoint's network from.
pub const NETWORK_LABEL: &str = "topology.istio.io/network";

/// Errors that stop the registry.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("config directory {path}: {source}")]
    ConfigDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("watching {path}: {source}")]
    Watch {
        path: PathBuf,
        #[source]
        source: notify::Error,
    },
    #[error("the file watcher stopped")]
    WatcherGone,
    #[error("file reader task failed: {0}")]
    Reader(#[source] tokio::task::JoinError),
    #[error(transparent)]
    Sync(#[from] SyncError),
}

/// How the registry reads its directory.
#[derive(Clone, Debug)]
pub(crate) struct RegistryConfig {
    pub root: PathBuf,
    pub cluster: String,
    pub network: String,
    /// A burst of file events ends after this long without one.
    pub coalesce: Duration,
    /// ... or this long after it began.
    pub coalesce_max: Duration,
    /// Full rescan period, in case an event was missed; zero disables it.
    pub resync: Duration,
    pub watch_queue: usize,
    pub retry: RetryConfig,
}

/// Where the registry's changes go.
pub(crate) struct Outputs {
    pub writer: WriterHandle,
    pub pushes: mpsc::Sender<PushRequest>,
    pub kv: Arc<dyn ConfigKv>,
    pub metrics: Metrics,
    pub rejections: Rejections,
    pub ready: Readiness,
}

pub(crate) struct DirectoryRegistry {
    config: RegistryConfig,
    out: Outputs,
    index: Index,
    store: ConfigStore,
    events: EventBuffer,
    /// Keys this cluster has in the KV that the store lacks, kept because a file that
    /// may define them fails to parse. Deleted once that is no longer so.
    kv_only: BTreeSet<ConfigKey>,
    /// The root vanished: watch it again once it is back.
    root_lost: bool,
}

impl DirectoryRegistry {
    pub fn new(config: RegistryConfig, out: Outputs) -> Self {
        let events = EventBuffer::default();
        let mut store = ConfigStore::new();
        store.register_event_handler(None, events.handler(out.metrics.clone()));
        Self {
            config,
            out,
            index: Index::default(),
            store,
            events,
            kv_only: BTreeSet::new(),
            root_lost: false,
        }
    }

    /// Loads the directory, reconciles the KV, then follows changes until `shutdown`.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), RegistryError> {
        let root = self.config.root.clone();
        let dir_error = |source| RegistryError::ConfigDir {
            path: root.clone(),
            source,
        };
        let meta = std::fs::metadata(&root).map_err(dir_error)?;
        if !meta.is_dir() {
            return Err(dir_error(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "not a directory",
            )));
        }
        let mut watcher = DirWatcher::start(&root, self.config.watch_queue).map_err(|source| {
            RegistryError::Watch {
                path: root.clone(),
                source,
            }
        })?;
        tokio::pin!(shutdown);
        tokio::select! {
            started = self.start() => started?,
            // Shutdown while the KV is still unreachable: nothing is lost, the next start
            // loads and reconciles again.
            () = &mut shutdown => return Ok(()),
        }

        let resync = self.config.resync;
        let mut resync_timer = tokio::time::interval_at(
            tokio::time::Instant::now() + resync.max(Duration::from_secs(1)),
            resync.max(Duration::from_secs(1)),
        );
        resync_timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                batch = watcher.next_batch(self.config.coalesce, self.config.coalesce_max) => {
                    let batch = batch.ok_or(RegistryError::WatcherGone)?;
                    // An event on the root itself: it may have been replaced, and the
                    // watch went with the old one.
                    self.root_lost |= batch.paths.contains(&root);
                    let paths = if batch.rescan { BTreeSet::from([root.clone()]) } else { batch.paths };
                    self.sync_paths(paths, true).await?;
                    self.rewatch_if_back(&mut watcher);
                }
                _ = resync_timer.tick(), if !resync.is_zero() => {
                    self.rewatch_if_back(&mut watcher);
                    self.sync_paths(BTreeSet::from([root.clone()]), true).await?;
                }
            }
        }
        tracing::debug!("registry stopped");
        Ok(())
    }

    /// Watches the root again once it is back after being removed or replaced.
    fn rewatch_if_back(&mut self, watcher: &mut DirWatcher) {
        let root = &self.config.root;
        if !self.root_lost || !root.is_dir() {
            return;
        }
        match watcher.rewatch() {
            Ok(()) => {
                tracing::info!(dir = %root.display(), "watching the config directory again");
                self.root_lost = false;
            }
            Err(e) => tracing::warn!(dir = %root.display(), "cannot watch: {e}"),
        }
    }

    /// Loads the directory, marks the store synced, reconciles the KV and sends the
    /// first full push; then the ingest is ready.
    async fn start(&mut self) -> Result<(), RegistryError> {
        let root = self.config.root.clone();
        self.sync_paths(BTreeSet::from([root.clone()]), false)
            .await?;
        self.store.mark_synced();
        self.reconcile().await?;
        self.out.ready.set_ready(true);
        tracing::info!(
            dir = %root.display(),
            objects = self.store.len(),
            rejected = self.index.rejections().len(),
            "config directory loaded"
        );
        Ok(())
    }

    /// Re-reads what changed at `dirty` and applies it; `publish` sends a push for each
    /// change (off during the initial load, which ends in one full push).
    async fn sync_paths(
        &mut self,
        dirty: BTreeSet<PathBuf>,
        publish: bool,
    ) -> Result<(), RegistryError> {
        let root = self.config.root.clone();
        if !root.is_dir() {
            if !self.root_lost {
                tracing::warn!(dir = %root.display(), "config directory is gone; keeping the current config");
            }
            self.root_lost = true;
            return Ok(());
        }
        let known: Vec<PathBuf> = self.index.files().map(PathBuf::from).collect();
        let reads = tokio::task::spawn_blocking(move || {
            let files = scan::resolve(&root, &dirty, known.iter().map(PathBuf::as_path));
            files
                .into_iter()
                .map(|path| {
                    let read = scan::read(&path);
                    (path, read)
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(RegistryError::Reader)?;

        let mut touched = BTreeSet::new();
        for (path, mut read) in reads {
            if let FileRead::Parsed(docs) = &mut read {
                for parsed in docs.iter_mut().flatten() {
                    self.decorate(&mut parsed.config);
                }
            }
            let outcome = self.index.update(&path, read);
            for warning in &outcome.warnings {
                tracing::warn!("{warning}");
            }
            for rejection in &outcome.rejections {
                tracing::warn!("{rejection}");
                self.out
                    .metrics
                    .rejected
                    .get_or_create(&KindLabel {
                        kind: rejection.kind,
                    })
                    .inc();
            }
            touched.extend(outcome.touched);
        }
        for key in &touched {
            self.apply(key);
        }
        let rejections = self.index.rejections();
        self.out
            .metrics
            .rejected_current
            .set(i64::try_from(rejections.len()).unwrap_or(i64::MAX));
        self.out.rejections.set(rejections);

        for change in self.events.drain() {
            self.out.writer.send(change, publish).await?;
        }
        self.release_kv_only().await
    }

    /// Brings the store in line with the index for one key.
    fn apply(&mut self, key: &ConfigKey) {
        match self.index.effective(key) {
            Some(config) => {
                self.store.apply(config.clone());
            }
            None => {
                if self
                    .store
                    .get(key.kind, &key.namespace, &key.name)
                    .is_some()
                {
                    let _ = self.store.delete(key.kind, &key.namespace, &key.name);
                }
            }
        }
    }

    /// Stamps the ingest's cluster (and network, for workloads that do not name one).
    fn decorate(&self, config: &mut Config) {
        config.meta.cluster.clone_from(&self.config.cluster);
        if !self.config.network.is_empty()
            && matches!(config.kind(), Kind::Pod | Kind::WorkloadEntry)
        {
            config
                .meta
                .labels
                .entry(NETWORK_LABEL.to_string())
                .or_insert_with(|| self.config.network.clone());
        }
    }

    /// Start-up: deletes this cluster's KV keys no file defines, then sends one full push
    /// at the KV's latest revision.
    async fn reconcile(&mut self) -> Result<(), RegistryError> {
        let written = self.out.writer.flush().await?;
        let kv = self.out.kv.clone();
        let entries = retry("kv_entries", self.config.retry, &self.out.metrics, || {
            kv.entries()
        })
        .await
        .map_err(SyncError::Kv)?;
        let unidentified = self.index.unidentified_files();
        let keep_all = !unidentified.is_empty();
        if keep_all {
            tracing::warn!(
                files = ?unidentified,
                "files fail to parse without naming their objects: keeping every KV key of \
                 this cluster that no file defines until they parse"
            );
        }
        let store = &self.store;
        let index = &self.index;
        let plan = sync::plan(
            &entries,
            &self.config.cluster,
            |k| store.get(k.kind, &k.namespace, &k.name).is_some(),
            |k| keep_all || index.is_rejected(k),
        );
        let now = SystemTime::now();
        for key in plan.delete {
            tracing::info!(%key, "deleting config no file defines");
            let change = Change {
                key,
                config: None,
                at: now,
            };
            self.out.writer.send(change, false).await?;
        }
        self.kv_only.extend(plan.keep);
        let latest = plan.latest.max(written).max(self.out.writer.flush().await?);
        let push = PushRequest::full_everything(TriggerReason::GlobalUpdate, latest, now);
        self.out
            .pushes
            .send(push)
            .await
            .map_err(|_| SyncError::DebouncerGone)?;
        Ok(())
    }

    /// Deletes the KV keys kept at start-up once no failing file can define them.
    async fn release_kv_only(&mut self) -> Result<(), RegistryError> {
        let store = &self.store;
        self.kv_only
            .retain(|k| store.get(k.kind, &k.namespace, &k.name).is_none());
        if self.kv_only.is_empty() || !self.index.unidentified_files().is_empty() {
            return Ok(());
        }
        let index = &self.index;
        let released: Vec<ConfigKey> = self
            .kv_only
            .iter()
            .filter(|k| !index.is_rejected(k))
            .cloned()
            .collect();
        let now = SystemTime::now();
        for key in released {
            self.kv_only.remove(&key);
            tracing::info!(%key, "deleting config no file defines any more");
            let change = Change {
                key,
                config: None,
                at: now,
            };
            self.out.writer.send(change, true).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
