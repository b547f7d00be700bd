//! The builder's tasks: the replica follower and the build loop.

use crate::follow::{self, Feed};
use crate::metrics::{BuildLabels, Metrics};
use crate::replica::{Dirty, Replica};
use crate::snapshot::Built;
use crate::snapshot::SnapshotBuilder;
use crate::writer::{Retention, WriteError, Writer};
use futures::{FutureExt, StreamExt};
use prometheus_client::registry::Registry;
use shoal_infra::retry::{Backoff, RetryConfig};
use shoal_infra::runtime::DrainWatch;
use shoal_infra::telemetry::{self, TRACE_TARGET};
use shoal_proto::change::{ChangeSet, unix_nanos};
use shoal_proto::push::PushRequest;
use shoal_proto::transport::{Bus, ConfigKv, Delivery, SnapshotStore, TransportError};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::mpsc;
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
    /// Config KV entries the follower may hold for the build loop while a build runs.
    pub feed_capacity: usize,
    /// How often the store is checked for the latest snapshot (a Redis restarted empty
    /// is refilled within this).
    pub store_check_every: Duration,
}

impl Default for BuilderConfig {
    fn default() -> Self {
        Self {
            retention: Retention::default(),
            revision_wait: Duration::from_secs(30),
            refresh_every: Duration::from_secs(120),
            max_batch: 256,
            feed_capacity: 65_536,
            store_check_every: Duration::from_secs(1),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BuilderError {
    #[error("push request stream ended")]
    PushStreamEnded,
    #[error("the config KV follower stopped")]
    FollowerEnded,
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

    /// Runs until `drain` starts.
    pub async fn run(self, drain: DrainWatch) -> Result<(), BuilderError> {
        let (feed_tx, feed) = mpsc::channel(self.config.feed_capacity.max(1));
        let follower =
            tokio::spawn(follow::follow(self.kv, feed_tx).instrument(info_span!("replica")));
        let writer = Writer {
            store: self.store,
            bus: self.bus.clone(),
            retention: self.config.retention.clone(),
        };
        let mut state = BuildState {
            config: self.config,
            model: Some(Model {
                replica: Replica::new(),
                builder: SnapshotBuilder::new(),
            }),
            feed,
            synced: false,
            needs_full: false,
            store_lost: false,
            pending: None,
            built_version: 0,
            last_manifest: None,
            writer,
            metrics: self.metrics,
            status: self.status,
        };
        let result = state.serve(self.bus, drain.wait()).await;
        follower.abort();
        result
    }
}

/// The replica and the previous build: owned by the build loop, lent whole to the
/// blocking thread that builds.
struct Model {
    replica: Replica,
    builder: SnapshotBuilder,
}

struct BuildState {
    config: BuilderConfig,
    /// `None` only while a build runs.
    model: Option<Model>,
    feed: mpsc::Receiver<Feed>,
    synced: bool,
    /// Set after a failed build: the next one starts from nothing.
    needs_full: bool,
    /// The store lost data: the next write checks every chunk.
    store_lost: bool,
    /// A build not yet written, retried before any new build.
    pending: Option<PendingWrite>,
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
        let mut store_check = tokio::time::interval(self.config.store_check_every);
        store_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let retry_at = self.pending.as_ref().and_then(|p| p.retry_at);
            tokio::select! {
                _ = &mut shutdown => return Ok(()),
                _ = refresh.tick() => self.refresh().await,
                _ = store_check.tick(), if self.pending.is_none() => self.check_store().await,
                _ = sleep_until_some(retry_at), if retry_at.is_some() => self.retry_write().await,
                feed = self.feed.recv() => match feed {
                    Some(feed) => self.apply(feed),
                    None => return Err(BuilderError::FollowerEnded),
                },
                next = pushes.next(), if self.pending.is_none() => {
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
                    // Every line a build logs names the revision it builds.
                    let span = info_span!(
                        target: TRACE_TARGET,
                        "build",
                        revision = tracing::field::Empty,
                        requests = batch.len(),
                        full = tracing::field::Empty,
                        version = tracing::field::Empty,
                    );
                    // Part of the trace of the earliest change in the batch (the one
                    // `ChangeSet::merge` keeps).
                    if let Some(first) = batch
                        .iter()
                        .map(|d| &d.message.changes)
                        .filter(|c| !c.trace.is_empty())
                        .min_by_key(|c| c.start_unix_nanos)
                    {
                        telemetry::set_parent(&span, &first.trace);
                    }
                    self.handle(batch).instrument(span).await;
                }
            }
        }
    }

    fn model(&mut self) -> &mut Model {
        self.model
            .as_mut()
            .expect("the model is back after every build")
    }

    /// Applies what the follower fed.
    fn apply(&mut self, feed: Feed) {
        let metrics = self.metrics.clone();
        let replica = &mut self.model().replica;
        let mut apply = |entry| {
            if let Err(e) = replica.apply(entry) {
                metrics.config_errors.inc();
                warn!(error = %e, "skipping config entry");
            }
        };
        let listed = match feed {
            Feed::Listed(entries) => {
                entries.into_iter().for_each(&mut apply);
                true
            }
            Feed::Entry(entry) => {
                apply(entry);
                false
            }
        };
        let (rev, len) = (replica.revision(), replica.len());
        self.metrics.replica_revision.set(rev as i64);
        self.metrics.replica_objects.set(len as i64);
        if listed && !self.synced {
            self.synced = true;
            info!(revision = rev, objects = len, "config replica synced");
        }
        let synced = self.synced;
        self.status.update(|s| {
            s.replica_synced = synced;
            s.replica_revision = rev;
            s.replica_objects = len;
        });
    }

    /// Applies fed entries until the replica is synced and holds `revision`, for at most
    /// `revision_wait`; then whatever else is already waiting. False on a timeout.
    async fn catch_up(&mut self, revision: u64) -> bool {
        let deadline = tokio::time::Instant::now() + self.config.revision_wait;
        while !self.synced || self.model().replica.revision() < revision {
            match tokio::time::timeout_at(deadline, self.feed.recv()).await {
                Ok(Some(feed)) => self.apply(feed),
                Ok(None) | Err(_) => return false,
            }
        }
        while let Ok(feed) = self.feed.try_recv() {
            self.apply(feed);
        }
        true
    }

    async fn handle(&mut self, batch: Vec<Delivery<PushRequest>>) {
        let Some(request) = batch
            .iter()
            .map(|d| d.message.clone())
            .reduce(PushRequest::merge)
        else {
            return;
        };
        tracing::Span::current().record("revision", request.revision);
        let waited =
            info_span!(target: TRACE_TARGET, "wait for revision", revision = request.revision);
        if !self.catch_up(request.revision).instrument(waited).await {
            warn!(
                revision = request.revision,
                have = self.model().replica.revision(),
                "replica did not reach the requested revision; leaving the request for redelivery"
            );
            return;
        }
        // The replica's own log covers revisions other builders built; the requests
        // bring their start, reasons and trace (and "everything" on a resync).
        let changes = match self.model().replica.take_changes() {
            Some(own) => own.merge(request.changes.clone()),
            None if self.needs_full => request.changes.clone(),
            None => {
                debug!(revision = request.revision, "already built");
                ack_all(batch).await;
                return;
            }
        };
        let mut dirty = Dirty::of(&changes);
        if self.needs_full {
            self.model().builder = SnapshotBuilder::new();
            self.built_version = 0;
            dirty.all = true;
        }
        let started = Instant::now();
        // CPU-bound: off the async workers, so the follower, the bus and the admin
        // server keep running while it builds.
        let mut model = self
            .model
            .take()
            .expect("the model is back after every build");
        let build_span = info_span!(target: TRACE_TARGET, "snapshot build", full = tracing::field::Empty, changed = tracing::field::Empty);
        let in_build = build_span.clone();
        let (model, built) = match tokio::task::spawn_blocking(move || {
            let _entered = in_build.enter();
            let version = model.replica.revision();
            let built = model.builder.build(
                &model.replica,
                dirty,
                version,
                unix_nanos(SystemTime::now()),
            );
            (model, built)
        })
        .instrument(build_span.clone())
        .await
        {
            Ok(done) => done,
            Err(e) => {
                // The model went down with the build: start again from an empty one,
                // which the follower's next listing refills.
                warn!(error = %e, "snapshot build panicked; rebuilding from scratch");
                self.model = Some(Model {
                    replica: Replica::new(),
                    builder: SnapshotBuilder::new(),
                });
                self.synced = false;
                self.needs_full = true;
                return;
            }
        };
        self.model = Some(model);
        self.metrics
            .build_seconds
            .observe(started.elapsed().as_secs_f64());
        let built = match built {
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
        build_span.record("full", built.full);
        build_span.record("changed", built.changed.len());
        drop(build_span);
        let current = tracing::Span::current();
        current.record("full", built.full);
        current.record("version", built.manifest.version);
        let kind = if built.full { "full" } else { "incremental" };
        self.metrics
            .builds
            .get_or_create(&BuildLabels { kind })
            .inc();
        // What proxies need is what the build found; when, why and the trace come from
        // the requests.
        let mut announced = ChangeSet {
            full: built.full,
            keys: built.changed.clone(),
            ..changes
        };
        // The edges' spans follow from this build (same trace as the request's).
        let trace = telemetry::inject(&current);
        if !trace.is_empty() {
            announced.trace = trace;
        }
        let pending = PendingWrite {
            built,
            base: self.built_version,
            announced,
            batch,
            started,
            verify_all: self.store_lost,
            backoff: Backoff::new(WRITE_RETRY),
            retry_at: None,
        };
        let span = info_span!(target: TRACE_TARGET, "snapshot write", version = pending.built.manifest.version);
        self.write(pending).instrument(span).await;
    }

    /// Writes a build; on failure keeps it to retry in process (no new build starts
    /// meanwhile, and nothing is acknowledged), checking every chunk the next time, as
    /// the store may have lost what it held.
    async fn write(&mut self, mut pending: PendingWrite) {
        let write_started = Instant::now();
        let chunks = match pending.verify_all {
            true => self.model().builder.encoded(),
            false => Vec::new(),
        };
        let written = async {
            let restored = self.writer.restore_chunks(&chunks).await?;
            let announced = pending.announced.clone();
            let mut stats = self
                .writer
                .write(&pending.built, pending.base, announced)
                .await?;
            stats.chunks_written += restored.chunks_written;
            stats.bytes_written += restored.bytes_written;
            Ok::<_, WriteError>(stats)
        }
        .await;
        let stats = match written {
            Ok(stats) => stats,
            Err(e) => {
                self.metrics.write_errors.inc();
                let wait = pending.backoff.next_delay();
                warn!(error = %e, ?wait, version = pending.built.manifest.version, "snapshot write failed; retrying");
                pending.verify_all = true;
                pending.retry_at = Some(tokio::time::Instant::now() + wait);
                self.pending = Some(pending);
                return;
            }
        };
        let PendingWrite {
            built,
            batch,
            started,
            ..
        } = pending;
        self.store_lost = false;
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
        self.metrics
            .snapshot_timestamp
            .set(built.manifest.built_unix_nanos as f64 / 1e9);
        info!(
            version = built.manifest.version,
            full = built.full,
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
        let chunks = self.model().builder.chunk_count();
        self.status.update(|s| {
            s.snapshot_version = built.manifest.version;
            s.chunks = chunks;
            s.builds += 1;
            s.last_build_ms = elapsed;
            s.last_warnings = built.warnings.clone();
        });
        ack_all(batch).await;
    }

    /// Retries the pending write, if its time has come.
    async fn retry_write(&mut self) {
        if let Some(pending) = self.pending.take() {
            self.write(pending).await;
        }
    }

    /// Whether the store still holds this builder's latest snapshot. A store that lost
    /// it (Redis restarted empty) gets every chunk the snapshot needs, its manifest and
    /// `latest` back at once, rather than at the next change.
    async fn check_store(&mut self) {
        let Some((version, manifest)) = self.last_manifest.clone() else {
            return;
        };
        let lost = match self.writer.holds(version).await {
            Ok(holds) => !holds,
            Err(e) => {
                debug!(error = %e, "snapshot store unavailable; checking again later");
                return;
            }
        };
        if !lost {
            return;
        }
        warn!(
            version,
            "the snapshot store lost the latest snapshot; restoring it"
        );
        self.store_lost = true;
        let chunks = self.model().builder.encoded();
        match self.writer.restore(&manifest, version, &chunks).await {
            Ok(stats) => {
                self.store_lost = false;
                self.metrics.restores.inc();
                info!(
                    version,
                    chunks_written = stats.chunks_written,
                    bytes = stats.bytes_written,
                    "snapshot restored"
                );
            }
            Err(e) => warn!(error = %e, "restoring the snapshot failed; retrying"),
        }
    }

    async fn refresh(&mut self) {
        let Some((version, manifest)) = self.last_manifest.clone() else {
            return;
        };
        let hashes = self.model().builder.hashes();
        if let Err(e) = self.writer.refresh(&manifest, version, &hashes).await {
            warn!(error = %e, "refreshing snapshot retention failed");
        }
    }
}

/// Waits between write retries: a store that returns is written to within about 2 s.
const WRITE_RETRY: RetryConfig = RetryConfig {
    min: Duration::from_millis(100),
    max: Duration::from_secs(2),
};

/// A build whose write has not succeeded yet.
struct PendingWrite {
    built: Built,
    /// The snapshot its change set is relative to.
    base: u64,
    announced: ChangeSet,
    /// Acknowledged once written.
    batch: Vec<Delivery<PushRequest>>,
    started: Instant,
    /// Check every chunk of the snapshot, not only the new ones.
    verify_all: bool,
    backoff: Backoff,
    retry_at: Option<tokio::time::Instant>,
}

async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn ack_all(batch: Vec<Delivery<PushRequest>>) {
    for d in batch {
        if let Err(e) = d.acker.ack().await {
            warn!(error = %e, "ack failed; the request may be redelivered (harmless)");
        }
    }
}
