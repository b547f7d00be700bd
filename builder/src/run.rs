//! The builder's tasks: the replica follower and the build loop.

use crate::metrics::{BuildLabels, Metrics};
use crate::replica::{Dirty, Replica};
use crate::snapshot::SnapshotBuilder;
use crate::writer::{Retention, Writer};
use futures::{FutureExt, StreamExt};
use prometheus_client::registry::Registry;
use shoal_proto::change::{ChangeSet, unix_nanos};
use shoal_proto::push::PushRequest;
use shoal_proto::transport::{Bus, ConfigKv, Delivery, SnapshotStore, TransportError};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;
use tracing::{Instrument, debug, info, info_span, warn};

#[derive(Clone, Debug)]
pub struct BuilderConfig {
    pub retention: Retention,
    /// How long a push request waits for the replica to reach its revision before it is
    /// left unacknowledged (and so redelivered).
    pub revision_wait: Duration,
    /// How often the latest snapshot's TTLs are refreshed.
    pub refresh_every: Duration,
    /// Push requests already queued are merged into one build, up to this many.
    pub max_batch: usize,
}

impl Default for BuilderConfig {
    fn default() -> Self {
        Self {
            retention: Retention::default(),
            revision_wait: Duration::from_secs(30),
            refresh_every: Duration::from_secs(120),
            max_batch: 256,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BuilderError {
    #[error("push request stream ended")]
    PushStreamEnded,
    #[error(transparent)]
    Transport(#[from] TransportError),
}

/// Shared, cheap-to-read state for `/debug` and readiness.
#[derive(Clone, Default)]
pub struct Status {
    inner: Arc<Mutex<StatusInner>>,
}

#[derive(Default, serde::Serialize)]
struct StatusInner {
    replica_synced: bool,
    replica_revision: u64,
    replica_objects: usize,
    snapshot_version: u64,
    chunks: usize,
    builds: u64,
    last_build_ms: f64,
    last_warnings: Vec<String>,
}

impl Status {
    pub fn ready(&self) -> bool {
        self.inner.lock().map(|s| s.replica_synced).unwrap_or(false)
    }

    pub fn json(&self) -> serde_json::Value {
        self.inner
            .lock()
            .map(|s| serde_json::to_value(&*s).unwrap_or_default())
            .unwrap_or_default()
    }

    fn update(&self, f: impl FnOnce(&mut StatusInner)) {
        if let Ok(mut s) = self.inner.lock() {
            f(&mut s);
        }
    }
}

/// A builder ready to run: metrics registered, transports in hand.
pub struct Builder {
    config: BuilderConfig,
    kv: Arc<dyn ConfigKv>,
    bus: Arc<dyn Bus>,
    store: Arc<dyn SnapshotStore>,
    metrics: Metrics,
    status: Status,
}

impl Builder {
    pub fn new(
        config: BuilderConfig,
        kv: Arc<dyn ConfigKv>,
        bus: Arc<dyn Bus>,
        store: Arc<dyn SnapshotStore>,
        registry: &mut Registry,
    ) -> Self {
        Self {
            config,
            kv,
            bus,
            store,
            metrics: Metrics::register(registry),
            status: Status::default(),
        }
    }

    /// Readiness and `/debug/builder` state.
    pub fn status(&self) -> Status {
        self.status.clone()
    }

    /// Runs until `shutdown` resolves.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), BuilderError> {
        let replica = Arc::new(Mutex::new(Replica::new()));
        let (revision_tx, revision_rx) = watch::channel(0u64);
        let follower = tokio::spawn(
            follow_replica(
                self.kv,
                replica.clone(),
                revision_tx,
                self.metrics.clone(),
                self.status.clone(),
            )
            .instrument(info_span!("replica")),
        );
        let writer = Writer {
            store: self.store,
            bus: self.bus.clone(),
            retention: self.config.retention.clone(),
        };
        let mut state = BuildState {
            config: self.config,
            replica,
            revision_rx,
            builder: SnapshotBuilder::new(),
            needs_full: false,
            built_version: 0,
            last_manifest: None,
            writer,
            metrics: self.metrics,
            status: self.status,
        };
        let result = state.serve(self.bus, shutdown).await;
        follower.abort();
        result
    }
}

async fn follow_replica(
    kv: Arc<dyn ConfigKv>,
    replica: Arc<Mutex<Replica>>,
    revision_tx: watch::Sender<u64>,
    metrics: Metrics,
    status: Status,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        // The initial listing marks the replica synced; the watch then replays (ignored
        // as already held) and follows.
        let listed = match kv.entries().await {
            Ok(entries) => entries,
            Err(e) => {
                warn!(error = %e, ?backoff, "config KV unavailable; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        let stream = match kv.watch().await {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, ?backoff, "config KV watch failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        let apply = |entry| {
            let mut r = replica.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = r.apply(entry) {
                metrics.config_errors.inc();
                warn!(error = %e, "skipping config entry");
            }
            (r.revision(), r.len())
        };
        for entry in listed {
            apply(entry);
        }
        let (rev, len) = {
            let r = replica.lock().unwrap_or_else(|e| e.into_inner());
            (r.revision(), r.len())
        };
        revision_tx.send_replace(rev);
        status.update(|s| {
            s.replica_synced = true;
            s.replica_revision = rev;
            s.replica_objects = len;
        });
        info!(revision = rev, objects = len, "config replica synced");
        backoff = Duration::from_millis(100);
        let mut stream = stream;
        while let Some(item) = stream.next().await {
            match item {
                Ok(entry) => {
                    let (rev, len) = apply(entry);
                    metrics.replica_revision.set(rev as i64);
                    metrics.replica_objects.set(len as i64);
                    revision_tx.send_if_modified(|r| {
                        let changed = *r != rev;
                        *r = rev;
                        changed
                    });
                }
                Err(e) => {
                    warn!(error = %e, "config KV watch interrupted; resyncing");
                    break;
                }
            }
        }
        if revision_tx.is_closed() {
            return;
        }
        tokio::time::sleep(backoff).await;
    }
}

struct BuildState {
    config: BuilderConfig,
    replica: Arc<Mutex<Replica>>,
    revision_rx: watch::Receiver<u64>,
    builder: SnapshotBuilder,
    /// Set after a failed write: the next build starts from nothing, so every chunk is
    /// checked against the store again.
    needs_full: bool,
    /// The version of this builder's previous build (0: none): announcements name it as
    /// the base their change set is relative to.
    built_version: u64,
    last_manifest: Option<(u64, Vec<u8>)>,
    writer: Writer,
    metrics: Metrics,
    status: Status,
}

impl BuildState {
    async fn serve(
        &mut self,
        bus: Arc<dyn Bus>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), BuilderError> {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut pushes = loop {
            match bus.push_requests().await {
                Ok(s) => break s,
                Err(e) => {
                    warn!(error = %e, "cannot subscribe to push requests; retrying");
                    tokio::select! {
                        _ = &mut shutdown => return Ok(()),
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
            }
        };
        let mut refresh = tokio::time::interval(self.config.refresh_every);
        refresh.tick().await;
        loop {
            tokio::select! {
                _ = &mut shutdown => return Ok(()),
                _ = refresh.tick() => self.refresh().await,
                next = pushes.next() => {
                    let Some(first) = next else { return Err(BuilderError::PushStreamEnded) };
                    let mut batch = Vec::new();
                    match first {
                        Ok(d) => batch.push(d),
                        Err(e) => { warn!(error = %e, "push request stream error"); continue; }
                    }
                    while batch.len() < self.config.max_batch {
                        match pushes.next().now_or_never() {
                            Some(Some(Ok(d))) => batch.push(d),
                            Some(Some(Err(e))) => warn!(error = %e, "push request stream error"),
                            _ => break,
                        }
                    }
                    self.handle(batch).instrument(info_span!("build")).await;
                }
            }
        }
    }

    async fn handle(&mut self, batch: Vec<Delivery<PushRequest>>) {
        let Some(request) = batch
            .iter()
            .map(|d| d.message.clone())
            .reduce(PushRequest::merge)
        else {
            return;
        };
        let wait = self.revision_rx.wait_for(|r| *r >= request.revision);
        if tokio::time::timeout(self.config.revision_wait, wait)
            .await
            .is_err()
        {
            warn!(
                revision = request.revision,
                have = *self.revision_rx.borrow(),
                "replica did not reach the requested revision; leaving the request for redelivery"
            );
            return;
        }
        let started = Instant::now();
        let built = {
            let mut replica = self.replica.lock().unwrap_or_else(|e| e.into_inner());
            // The replica's own log covers revisions other builders built; the requests
            // bring their start, reasons and trace (and "everything" on a resync).
            let changes = match replica.take_changes() {
                Some(own) => Some(own.merge(request.changes.clone())),
                None if self.needs_full => Some(request.changes.clone()),
                // Nothing moved since this builder's last build.
                None => None,
            };
            changes.map(|changes| {
                let mut dirty = Dirty::of(&changes);
                if self.needs_full {
                    self.builder = SnapshotBuilder::new();
                    self.built_version = 0;
                    dirty.all = true;
                }
                let version = replica.revision();
                self.builder
                    .build(&replica, dirty, version, unix_nanos(SystemTime::now()))
                    .map(|built| built.map(|b| (b, changes)))
            })
        };
        let Some(built) = built else {
            debug!(revision = request.revision, "already built");
            ack_all(batch).await;
            return;
        };
        self.metrics
            .build_seconds
            .observe(started.elapsed().as_secs_f64());
        let (built, changes) = match built {
            Ok(Some(b)) => b,
            Ok(None) => {
                self.metrics
                    .builds
                    .get_or_create(&BuildLabels { kind: "noop" })
                    .inc();
                debug!(revision = request.revision, "nothing changed");
                ack_all(batch).await;
                return;
            }
            Err(e) => {
                warn!(error = %e, "snapshot build failed");
                self.needs_full = true;
                return;
            }
        };
        for w in &built.warnings {
            warn!("{w}");
        }
        let kind = if built.full { "full" } else { "incremental" };
        self.metrics
            .builds
            .get_or_create(&BuildLabels { kind })
            .inc();
        let write_started = Instant::now();
        // What proxies need is what the build found; when, why and the trace come from
        // the requests.
        let announced = ChangeSet {
            full: built.full,
            keys: built.changed.clone(),
            ..changes
        };
        match self
            .writer
            .write(&built, self.built_version, announced)
            .await
        {
            Ok(stats) => {
                self.needs_full = false;
                self.built_version = built.manifest.version;
                self.metrics
                    .write_seconds
                    .observe(write_started.elapsed().as_secs_f64());
                self.metrics
                    .chunks_written
                    .inc_by(stats.chunks_written as u64);
                self.metrics
                    .bytes_written
                    .inc_by(stats.bytes_written as u64);
                self.metrics
                    .snapshot_version
                    .set(built.manifest.version as i64);
                info!(
                    version = built.manifest.version,
                    kind,
                    namespaces = built.namespaces_rebuilt,
                    chunks_written = stats.chunks_written,
                    bytes = stats.bytes_written,
                    advanced = stats.advanced,
                    build_ms = started.elapsed().as_secs_f64() * 1000.0,
                    "snapshot written"
                );
                if let Ok(bytes) = built.manifest.encode() {
                    self.last_manifest = Some((built.manifest.version, bytes));
                }
                let elapsed = started.elapsed().as_secs_f64() * 1000.0;
                let chunks = self.builder.chunk_count();
                self.status.update(|s| {
                    s.snapshot_version = built.manifest.version;
                    s.chunks = chunks;
                    s.builds += 1;
                    s.last_build_ms = elapsed;
                    s.last_warnings = built.warnings.clone();
                });
                ack_all(batch).await;
            }
            Err(e) => {
                self.metrics.write_errors.inc();
                self.needs_full = true;
                warn!(error = %e, "snapshot write failed; the request will be redelivered");
            }
        }
    }

    async fn refresh(&mut self) {
        let Some((version, manifest)) = &self.last_manifest else {
            return;
        };
        let hashes = self.builder.hashes();
        if let Err(e) = self.writer.refresh(manifest, *version, &hashes).await {
            warn!(error = %e, "refreshing snapshot retention failed");
        }
    }
}

async fn ack_all(batch: Vec<Delivery<PushRequest>>) {
    for d in batch {
        if let Err(e) = d.acker.ack().await {
            warn!(error = %e, "ack failed; the request may be redelivered (harmless)");
        }
    }
}
