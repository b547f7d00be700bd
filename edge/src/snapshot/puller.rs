//! Follows snapshot announcements and keeps the edge's PushContext current.
//!
//! Fetches the root manifest, then level by level only the pages (index pages, then leaf
//! pages) whose hash it does not hold, then only the chunks those leaf pages list with a
//! hash it does not hold (`held.rs`); applies them to
//! the previous PushContext (so an endpoint change keeps every index and scope), and
//! never moves backwards. With the bus or the store down it keeps serving what it has,
//! and polls `latest` so it converges once they are back.

use super::SnapshotUpdate;
use super::held::Held;
use bytes::Bytes;
use futures::StreamExt;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use shoal_infra::telemetry::{self, TRACE_TARGET};
use shoal_proto::change::{ChangeKey, ChangeSet, TriggerReason, namespace_changes, unix_nanos};
use shoal_proto::model::Resolution;
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::{Chunk, ChunkHash, ChunkKey, Manifest, SnapshotError};
use shoal_proto::transport::{Bus, SnapshotEvent, SnapshotStore, TransportError};
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, watch};
use tracing::{Instrument, debug, info, info_span, warn};

/// The span of one snapshot pull and apply: in the change's trace when announced with it.
fn pull_span(version: u64) -> tracing::Span {
    info_span!(
        target: TRACE_TARGET,
        "snapshot pull",
        version,
        applied = tracing::field::Empty,
        fetched = tracing::field::Empty,
        full = tracing::field::Empty,
    )
}

/// Drops the snapshot a pull replaced on a blocking thread, not on the worker that is
/// about to run the dispatcher: freeing a mesh's maps (1,000 services: ~10 ms) came before
/// every push of the change. Where a stream still holds it, this only counts down.
fn retire(replaced: impl Send + 'static) {
    drop(tokio::task::spawn_blocking(move || drop(replaced)));
}

#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// A page or chunk the manifest names has expired or was never written.
    #[error("snapshot {version}: {what} {hash} is missing from the store")]
    Missing {
        version: u64,
        what: &'static str,
        hash: ChunkHash,
    },
}

#[derive(Clone, Debug)]
pub struct PullerConfig {
    /// How often `latest` is polled besides announcements (covers a lost announcement
    /// or a bus outage).
    pub poll_interval: Duration,
    /// Chunks (or pages) fetched per store round trip.
    pub fetch_batch: usize,
}

impl Default for PullerConfig {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(5),
            fetch_batch: 512,
        }
    }
}

#[derive(Clone)]
struct Metrics {
    version: Gauge,
    /// The served snapshot's build time (Unix seconds, from its manifest): with the
    /// builder's `shoal_builder_snapshot_timestamp_seconds`, `max(builder) - edge` is the
    /// edge's snapshot lag in seconds.
    timestamp: Gauge<f64, AtomicU64>,
    pulls: Counter,
    pages_fetched: Counter,
    chunks_fetched: Counter,
    bytes_fetched: Counter,
    errors: Counter,
}

impl Metrics {
    fn register(registry: &mut Registry) -> Self {
        let m = Metrics {
            version: Gauge::default(),
            timestamp: Gauge::default(),
            pulls: Counter::default(),
            pages_fetched: Counter::default(),
            chunks_fetched: Counter::default(),
            bytes_fetched: Counter::default(),
            errors: Counter::default(),
        };
        let r = registry.sub_registry_with_prefix("shoal_edge_snapshot");
        r.register("version", "Snapshot version served", m.version.clone());
        r.register(
            "timestamp_seconds",
            "Build time of the snapshot served, in Unix seconds (from its manifest)",
            m.timestamp.clone(),
        );
        r.register("pulls", "Snapshots applied", m.pulls.clone());
        r.register(
            "pages_fetched",
            "Manifest pages (index and leaf) fetched from the store",
            m.pages_fetched.clone(),
        );
        r.register(
            "chunks_fetched",
            "Chunks fetched from the store",
            m.chunks_fetched.clone(),
        );
        r.register(
            "bytes_fetched",
            "Snapshot bytes fetched from the store: root manifests, pages and chunks",
            m.bytes_fetched.clone(),
        );
        r.register(
            "errors",
            "Failed snapshot pulls (retried)",
            m.errors.clone(),
        );
        m
    }
}

pub struct SnapshotPuller {
    config: PullerConfig,
    store: Arc<dyn SnapshotStore>,
    bus: Arc<dyn Bus>,
    /// The pages and chunks of the snapshot served.
    held: Held,
    push: Arc<PushContext>,
    push_tx: watch::Sender<Arc<PushContext>>,
    updates_tx: mpsc::Sender<SnapshotUpdate>,
    metrics: Metrics,
    synced: Arc<AtomicBool>,
    /// The newest snapshot version announced or read as the store's latest, pulled or
    /// not: how far behind the served snapshot is.
    announced: Arc<AtomicU64>,
}

impl SnapshotPuller {
    /// Returns the puller, the latest PushContext (for new streams) and the update
    /// stream (for the push dispatcher), bounded at `update_capacity`.
    pub fn new(
        config: PullerConfig,
        store: Arc<dyn SnapshotStore>,
        bus: Arc<dyn Bus>,
        update_capacity: usize,
        registry: &mut Registry,
    ) -> (
        Self,
        watch::Receiver<Arc<PushContext>>,
        mpsc::Receiver<SnapshotUpdate>,
    ) {
        let push = Arc::new(PushContext::empty());
        let (push_tx, push_rx) = watch::channel(push.clone());
        let (updates_tx, updates_rx) = mpsc::channel(update_capacity.max(1));
        let puller = SnapshotPuller {
            config,
            store,
            bus,
            held: Held::default(),
            push,
            push_tx,
            updates_tx,
            metrics: Metrics::register(registry),
            synced: Arc::default(),
            announced: Arc::default(),
        };
        (puller, push_rx, updates_rx)
    }

    /// Set once the store's `latest` snapshot has been applied: the edge then serves real
    /// config, and is ready.
    pub fn synced(&self) -> Arc<AtomicBool> {
        self.synced.clone()
    }

    /// The newest snapshot version this edge knows exists (announced, or the store's
    /// latest), whether or not it has been pulled yet.
    pub fn announced(&self) -> Arc<AtomicU64> {
        self.announced.clone()
    }

    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        // The first poll is one interval away: start-up pulls `latest` already.
        let period = self.config.poll_interval;
        let mut poll = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        'subscribe: loop {
            let mut events = match self.bus.snapshot_events().await {
                Ok(s) => Some(s),
                Err(e) => {
                    warn!(error = %e, "cannot subscribe to snapshot announcements; polling");
                    None
                }
            };
            // Catch up on what was announced while not subscribed.
            self.pull_latest().await;
            loop {
                tokio::select! {
                    _ = &mut shutdown => return,
                    _ = poll.tick() => {
                        self.pull_latest().await;
                        if events.is_none() {
                            continue 'subscribe;
                        }
                    }
                    event = async {
                        match events.as_mut() {
                            Some(s) => s.next().await,
                            None => std::future::pending().await,
                        }
                    } => match event {
                        Some(Ok(event)) => {
                            self.announced.fetch_max(event.version, Ordering::AcqRel);
                            if event.version > self.push.version() {
                                let version = event.version;
                                let span = pull_span(version);
                                telemetry::set_parent(&span, &event.changes.trace);
                                if let Err(e) = self.pull(version, Announced::Event(event)).instrument(span).await {
                                    self.metrics.errors.inc();
                                    warn!(version, error = %e, "snapshot pull failed; will retry from latest");
                                }
                            }
                        }
                        Some(Err(TransportError::Lagged(n))) => {
                            debug!(missed = n, "snapshot announcements lagged; pulling latest");
                            self.pull_latest().await;
                        }
                        Some(Err(e)) => {
                            warn!(error = %e, "snapshot announcements interrupted; resubscribing");
                            continue 'subscribe;
                        }
                        None => continue 'subscribe,
                    }
                }
            }
        }
    }

    async fn pull_latest(&mut self) {
        let latest = self.store.latest().await;
        if let Ok(Some(v)) = latest {
            self.announced.fetch_max(v, Ordering::AcqRel);
        }
        match latest {
            Ok(Some(v)) if v > self.push.version() => {
                match self.pull(v, Announced::None).instrument(pull_span(v)).await {
                    Ok(()) => self.synced.store(true, Ordering::Release),
                    Err(e) => {
                        self.metrics.errors.inc();
                        warn!(version = v, error = %e, "snapshot pull failed; keeping the current snapshot");
                    }
                }
            }
            Ok(Some(_)) => self.synced.store(true, Ordering::Release),
            Ok(None) => {}
            Err(e) => {
                self.metrics.errors.inc();
                debug!(error = %e, "snapshot store unavailable; keeping the current snapshot");
            }
        }
    }

    /// Applies snapshot `version` (or the latest, if that manifest expired).
    async fn pull(&mut self, version: u64, announced: Announced) -> Result<(), PullError> {
        let manifest = match self.manifest(version).await? {
            Some(manifest) => manifest,
            None => match self.store.latest().await? {
                Some(latest) if latest > self.push.version() => {
                    match self.manifest(latest).await? {
                        Some(manifest) => manifest,
                        None => return Ok(()),
                    }
                }
                _ => return Ok(()),
            },
        };
        if manifest.version <= self.push.version() {
            return Ok(());
        }
        // Only the pages this edge does not hold, a level per round trip, and from them
        // only the chunks it lacks.
        let mut descent = self.held.descend(&manifest);
        while !descent.wanted().is_empty() {
            let bodies = self
                .fetch(manifest.version, descent.what(), descent.wanted())
                .await?;
            descent.take(&self.held, bodies)?;
        }
        let pages = descent.finish();
        self.metrics.pages_fetched.inc_by(pages.len() as u64);
        let plan = self.held.plan(&manifest, &pages);
        let removed = plan.removed;
        let mut chunks = Vec::with_capacity(plan.fetch.len());
        let bodies = self.fetch(manifest.version, "chunk", &plan.fetch).await?;
        for (hash, body) in plan.fetch.iter().zip(bodies) {
            chunks.push(Chunk::decode(hash, &body)?);
        }
        self.metrics.chunks_fetched.inc_by(chunks.len() as u64);
        let pages_fetched = pages.len();

        let held = self.push.version();
        let fetched = chunks.len();
        let changes = match announced {
            // The builder's change set is exact for an edge that holds its base.
            Announced::Event(event) if event.base == held && event.version == manifest.version => {
                Ok(event.changes)
            }
            announced => Err((self.diff(&chunks, &removed), announced)),
        };
        let next = Arc::new(
            self.push
                .with_changes(manifest.version, chunks, removed.clone()),
        );
        let mut changes = match changes {
            Ok(changes) => changes,
            Err((mut diffed, announced)) => {
                // A DNS service's endpoints are inlined in its cluster: a CDS change.
                diffed.full |= diffed.keys.iter().any(|k| match k {
                    ChangeKey::Service(s) => next
                        .index()
                        .services_by_host
                        .get(&s.hostname)
                        .is_some_and(|svcs| {
                            svcs.iter()
                                .any(|s| s.resolution != Resolution::ClientSideLb)
                        }),
                    _ => false,
                });
                if let Announced::Event(event) = announced {
                    diffed.reasons = event.changes.reasons;
                    diffed.start_unix_nanos = event.changes.start_unix_nanos;
                    diffed.trace = event.changes.trace;
                }
                diffed
            }
        };
        if held == 0 {
            // The first snapshot: every proxy.
            changes.full = true;
            changes.keys.clear();
        }
        self.held.apply(&manifest, pages);
        let replaced = (
            std::mem::replace(&mut self.push, next.clone()),
            self.push_tx.send_replace(next.clone()),
        );
        self.metrics.version.set(manifest.version as i64);
        self.metrics
            .timestamp
            .set(manifest.built_unix_nanos as f64 / 1e9);
        self.metrics.pulls.inc();
        info!(
            version = manifest.version,
            pages = pages_fetched,
            fetched,
            removed = removed.len(),
            full = changes.full,
            age_ms = (unix_nanos(SystemTime::now()).saturating_sub(manifest.built_unix_nanos))
                / 1_000_000,
            "snapshot applied"
        );
        // The dispatch follows from this pull, in the change's trace.
        let current = tracing::Span::current();
        current.record("applied", manifest.version);
        current.record("fetched", fetched);
        current.record("full", changes.full);
        let trace = telemetry::inject(&current);
        if !trace.is_empty() {
            changes.trace = trace;
        }
        let update = SnapshotUpdate {
            push: next,
            changes,
        };
        self.synced.store(true, Ordering::Release);
        // Bounded: a slow dispatcher slows the puller rather than growing memory.
        let _ = self.updates_tx.send(update).await;
        retire(replaced);
        Ok(())
    }

    /// The root manifest of `version`, if the store still has it.
    async fn manifest(&self, version: u64) -> Result<Option<Manifest>, PullError> {
        let Some(bytes) = self.store.get_manifest(version).await? else {
            return Ok(None);
        };
        self.metrics.bytes_fetched.inc_by(bytes.len() as u64);
        Ok(Some(Manifest::decode(&bytes)?))
    }

    /// Fetches pages or chunks by hash, `fetch_batch` per round trip; every one must be
    /// there.
    async fn fetch(
        &self,
        version: u64,
        what: &'static str,
        hashes: &[ChunkHash],
    ) -> Result<Vec<Bytes>, PullError> {
        let mut out = Vec::with_capacity(hashes.len());
        for batch in hashes.chunks(self.config.fetch_batch.max(1)) {
            let bodies = self.store.get_chunks(batch).await?;
            for (hash, body) in batch.iter().zip(bodies) {
                let Some(body) = body else {
                    return Err(PullError::Missing {
                        version,
                        what,
                        hash: *hash,
                    });
                };
                self.metrics.bytes_fetched.inc_by(body.len() as u64);
                out.push(body);
            }
        }
        Ok(out)
    }

    /// What changed between the snapshot held and `next`, from the chunks that differ:
    /// routing by the hostnames it concerns (a diff of each changed namespace chunk),
    /// endpoints by their service. Used when no announcement relative to the held
    /// snapshot is at hand.
    fn diff(&self, chunks: &[Chunk], removed: &[ChunkKey]) -> ChangeSet {
        let mut full = false;
        let mut narrowed = true;
        let mut keys = BTreeSet::new();
        for key in chunks.iter().map(Chunk::key).chain(removed.iter().cloned()) {
            match key {
                ChunkKey::Namespace(ns) => {
                    full = true;
                    let new = chunks.iter().find_map(|c| match c {
                        Chunk::Namespace(n) if n.namespace == ns => Some(n),
                        _ => None,
                    });
                    let old = self.push.namespace(&ns).map(|n| &**n);
                    match namespace_changes(old, new) {
                        Some(changed) => keys.extend(changed),
                        None => narrowed = false,
                    }
                }
                ChunkKey::Endpoints(svc) => {
                    keys.insert(ChangeKey::Service(svc));
                }
            }
        }
        if !narrowed {
            full = true;
            keys.clear();
        }
        ChangeSet::of(full, keys, TriggerReason::Unknown, SystemTime::now())
    }
}

/// What the puller knows of the snapshot it pulls.
enum Announced {
    /// Its announcement, with the change set relative to the announcing builder's base.
    Event(SnapshotEvent),
    /// Nothing: found as `latest` (start-up, a poll, a lagged or lost announcement).
    None,
}
