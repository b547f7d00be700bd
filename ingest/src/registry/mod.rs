//! The directory registry: YAML files under a directory, the first [`Source`].
//!
//! ```text
//!  notify ──► watch (coalesced batches) ──► scan::resolve ──► scan::read + parse
//!      ──► Index (per-file objects, last write wins, rejected objects keep their
//!          earlier version) ──► SourceSink::apply / delete ──► commit ──► KV sync
//! ```
//!
//! Files hold what `kubectl get -o yaml` writes (`kind: List` items load one by one).
//! Nodes are not config: their topology labels are the localities of the Pods on them,
//! as in the Kubernetes registry ([`shoal_proto::config::topology`]). Documents of kinds
//! Shoal does not read are warnings, never dropped without a word.
//!
//! Start-up: the watch starts first (so no change is missed), the directory is loaded,
//! then the sink is told it is synced: the KV keys of this cluster's `dir` source that
//! no file defines are deleted and one full push is sent at the KV's latest revision.

mod index;
mod rejections;
mod scan;
mod stamps;
mod warnings;
mod watch;

pub use rejections::{Rejection, Rejections};
pub use scan::{ConfigFile, read_dir};
pub use warnings::{Warning, Warnings};

use crate::source::{Source, SourceSink};
use crate::sync::SyncError;
use index::{FileRead, Index};
use shoal_proto::config::parse::{NodeLabels, ParseError, Parsed};
use shoal_proto::config::topology::NodeLocalities;
use shoal_proto::config::{ConfigKey, Kind};
use stamps::{Reread, Stamps};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};
use watch::DirWatcher;

/// The directory's source name: its objects' `Origin::source` and KV key segment.
pub const SOURCE: &str = "dir";

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
    /// A burst of file events ends after this long without one.
    pub coalesce: Duration,
    /// ... or this long after it began.
    pub coalesce_max: Duration,
    /// Full rescan period, in case an event was missed; zero disables it.
    pub resync: Duration,
    pub watch_queue: usize,
    /// Mesh configs (ConfigMap `istio`) are read in this namespace only.
    pub system_namespace: String,
}

pub(crate) struct DirectoryRegistry {
    config: RegistryConfig,
    index: Index,
    /// The Nodes each file defines: their topology labels are the localities of the
    /// Pods on them, exactly as in the Kubernetes registry.
    node_files: BTreeMap<PathBuf, Vec<NodeLabels>>,
    /// Per file, its documents of kinds Shoal does not read: warned about, not dropped
    /// without a word.
    ignored_files: BTreeMap<PathBuf, Vec<Warning>>,
    nodes: NodeLocalities,
    /// Each file's stamp when last read: a directory rescanned for a hidden entry's
    /// event re-reads only the files whose stamp moved.
    stamps: Stamps,
    /// The root vanished: watch it again once it is back.
    root_lost: bool,
}

impl Source for DirectoryRegistry {
    const NAME: &'static str = SOURCE;
    type Error = RegistryError;

    async fn run(
        self,
        sink: SourceSink,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), RegistryError> {
        DirectoryRegistry::run(self, sink, shutdown).await
    }
}

impl DirectoryRegistry {
    pub fn new(config: RegistryConfig) -> Self {
        Self {
            config,
            index: Index::default(),
            node_files: BTreeMap::new(),
            ignored_files: BTreeMap::new(),
            nodes: NodeLocalities::default(),
            stamps: Stamps::default(),
            root_lost: false,
        }
    }

    /// Whether `doc` is a mesh config outside the system namespace: istiod never reads
    /// one there, so neither does Shoal.
    fn foreign_mesh_config(&self, doc: &Result<Parsed, ParseError>) -> bool {
        let Ok(parsed) = doc else { return false };
        let config = &parsed.config;
        let foreign = config.kind() == Kind::MeshConfig
            && config.meta.namespace != self.config.system_namespace;
        if foreign {
            tracing::debug!(
                object = %config.key(),
                system_namespace = %self.config.system_namespace,
                "mesh config outside the system namespace: not read"
            );
        }
        foreign
    }

    /// Loads the directory, reconciles the KV, then follows changes until `shutdown`.
    async fn run(
        mut self,
        mut sink: SourceSink,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), RegistryError> {
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
            started = self.start(&mut sink) => started?,
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
                    let (paths, reread) = if batch.rescan {
                        (BTreeSet::from([root.clone()]), Reread::All)
                    } else {
                        (batch.paths, Reread::Changed)
                    };
                    self.sync_paths(&mut sink, paths, reread, true, batch.last_seen).await?;
                    self.rewatch_if_back(&mut watcher);
                }
                _ = resync_timer.tick(), if !resync.is_zero() => {
                    self.rewatch_if_back(&mut watcher);
                    let all = BTreeSet::from([root.clone()]);
                    self.sync_paths(&mut sink, all, Reread::All, true, None).await?;
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

    /// Loads the directory and tells the sink it is synced: it reconciles the KV and
    /// sends the first full push; then the ingest is ready.
    async fn start(&mut self, sink: &mut SourceSink) -> Result<(), RegistryError> {
        let root = self.config.root.clone();
        self.sync_paths(
            sink,
            BTreeSet::from([root.clone()]),
            Reread::All,
            false,
            None,
        )
        .await?;
        let unidentified = self.index.unidentified_files();
        if !unidentified.is_empty() {
            tracing::warn!(
                files = ?unidentified,
                "files fail to parse without naming their objects: keeping every KV key of \
                 this source that no file defines until they parse"
            );
        }
        let protected = self.protected();
        sink.synced(protected).await?;
        tracing::info!(
            dir = %root.display(),
            objects = sink.len(),
            rejected = self.index.rejections().len(),
            "config directory loaded"
        );
        Ok(())
    }

    /// KV keys no file defines that must stay: those of objects a file rejects (their
    /// earlier version is served), and every key while a file fails to parse without
    /// naming its objects.
    fn protected(&self) -> impl Fn(&ConfigKey) -> bool + '_ {
        let keep_all = !self.index.unidentified_files().is_empty();
        move |k| keep_all || self.index.is_rejected(k)
    }

    /// Takes the Nodes the files define now; the Pods whose locality moved.
    fn follow_nodes(&mut self) -> Vec<ConfigKey> {
        let mut now: BTreeMap<&str, &NodeLabels> = BTreeMap::new();
        for node in self.node_files.values().flatten() {
            if let Some(other) = now.insert(&node.name, node) {
                tracing::warn!(node = %node.name, at = %node.location, also = %other.location, "Node defined twice; the later file's labels are used");
            }
        }
        let mut moved = Vec::new();
        for gone in self.nodes.nodes() {
            if !now.contains_key(gone.as_str()) {
                // Its Pods lose the locality: it is no longer known.
                moved.extend(self.nodes.set_node(&gone, &BTreeMap::new()));
                self.nodes.remove_node(&gone);
            }
        }
        for (name, node) in now {
            moved.extend(self.nodes.set_node(name, &node.labels));
        }
        moved
    }

    /// Re-reads what changed at `dirty` and applies it; `publish` sends a push for each
    /// change (off during the initial load, which ends in one full push), dated `seen`
    /// when the file events give the time. With [`Reread::Changed`], a file found under
    /// a changed directory is read only if its stamp moved; one named itself, always.
    async fn sync_paths(
        &mut self,
        sink: &mut SourceSink,
        dirty: BTreeSet<PathBuf>,
        reread: Reread,
        publish: bool,
        seen: Option<SystemTime>,
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
        // Lent to the reader and given back (lost only if it panics: then all is read).
        let stamps = std::mem::take(&mut self.stamps);
        let (reads, stamps) = tokio::task::spawn_blocking(move || {
            let files = scan::resolve(&root, &dirty, known.iter().map(PathBuf::as_path));
            let reads = stamps
                .to_read(files, &dirty, reread)
                .into_iter()
                .map(|(path, stamp)| {
                    let (read, extras) = scan::read(&path);
                    (path, stamp, read, extras)
                })
                .collect::<Vec<_>>();
            (reads, stamps)
        })
        .await
        .map_err(RegistryError::Reader)?;
        self.stamps = stamps;

        let mut touched = BTreeSet::new();
        for (path, stamp, mut read, extras) in reads {
            let stamp = match &read {
                FileRead::Removed => None,
                FileRead::Parsed(_) | FileRead::Unreadable(_) => stamp,
            };
            self.stamps.record(&path, stamp);
            match &read {
                FileRead::Removed => {
                    self.node_files.remove(&path);
                    self.ignored_files.remove(&path);
                }
                FileRead::Parsed(_) => {
                    let ignored: Vec<Warning> =
                        extras.ignored.iter().map(Warning::ignored).collect();
                    if self.ignored_files.get(&path) != Some(&ignored) {
                        for warning in &ignored {
                            tracing::warn!("{warning}");
                        }
                    }
                    self.node_files.insert(path.clone(), extras.nodes);
                    self.ignored_files.insert(path.clone(), ignored);
                }
                // Nothing in it can be trusted: what it held stays as it was.
                FileRead::Unreadable(_) => {}
            }
            if let FileRead::Parsed(docs) = &mut read {
                docs.retain(|doc| !self.foreign_mesh_config(doc));
                for parsed in docs.iter_mut().flatten() {
                    sink.stamp(&mut parsed.config);
                }
            }
            let outcome = self.index.update(&path, read);
            for warning in &outcome.warnings {
                tracing::warn!("{warning}");
            }
            for rejection in &outcome.rejections {
                sink.count_rejection(rejection);
            }
            touched.extend(outcome.touched);
        }
        touched.extend(self.follow_nodes());
        for key in &touched {
            match self.index.effective(key) {
                Some(config) => {
                    let mut config = config.clone();
                    self.nodes.stamp(&mut config);
                    sink.apply(config);
                }
                None => {
                    self.nodes.forget_pod(key);
                    sink.delete(key);
                }
            }
        }
        sink.set_rejections(self.index.rejections());
        let mut warnings = self.index.warnings();
        warnings.extend(self.ignored_files.values().flatten().cloned());
        sink.set_warnings(warnings);
        let protected = self.protected();
        sink.commit(publish, seen, protected).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
