//! The puller over the in-process bus and store: which change set reaches the
//! dispatcher — the builder's when the edge holds its base, the edge's own diff
//! otherwise — what one endpoint change makes an edge fetch (the root manifest, one page
//! per level of the page tree, one chunk), what its first sync fetches, that a root
//! of another snapshot format is refused, not served, and that a replaced snapshot is
//! freed.
//!
//! ```sh
//! cargo test -p shoal-edge --lib snapshot::tests::one_endpoint_change -- --nocapture
//! ```

use super::{PullerConfig, SnapshotPuller, SnapshotUpdate};
use bytes::Bytes;
use prometheus_client::registry::Registry;
use shoal_infra::memory::{MemoryBus, MemorySnapshotStore};
use shoal_proto::change::{ChangeKey, ChangeSet, TriggerReason};
use shoal_proto::config::istio::{Destination, HttpRoute, HttpRouteDestination, VirtualService};
use shoal_proto::model::{NamedConfig, NamespaceConfig, ServiceKey};
use shoal_proto::snapshot::{Chunk, ChunkHash, ChunkKey, IndexPage, Manifest};
use shoal_proto::transport::{Bus, Result as StoreResult, SnapshotEvent, SnapshotStore};
use shoal_test_support::fixtures;
use shoal_test_support::meshgen::{Mesh, MeshSpec};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;

const HOST: &str = "a.ns.svc.cluster.local";

fn namespace(timeout: &str) -> NamespaceConfig {
    let vs = VirtualService {
        hosts: vec![HOST.into()],
        http: vec![HttpRoute {
            route: vec![HttpRouteDestination {
                destination: Destination {
                    host: HOST.into(),
                    ..Default::default()
                },
                weight: 0,
                headers: None,
            }],
            timeout: Some(timeout.into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    NamespaceConfig {
        namespace: "ns".into(),
        virtual_services: vec![NamedConfig {
            name: "a".into(),
            namespace: "ns".into(),
            created: 0,
            spec: vs,
        }],
        ..Default::default()
    }
}

/// Writes snapshot `version` of `chunks` as a builder does: chunks and pages, the root
/// manifest, `latest`.
async fn write_snapshot(store: &MemorySnapshotStore, version: u64, chunks: &[Chunk]) {
    let (manifest, blobs) = fixtures::stored(version, chunks);
    let blobs: Vec<(_, Bytes)> = blobs
        .into_iter()
        .map(|(h, b)| (h, Bytes::copy_from_slice(&b)))
        .collect();
    let ttl = Duration::from_secs(60);
    store.put_chunks(&blobs, ttl).await.unwrap();
    let encoded = manifest.encode().unwrap();
    store
        .put_manifest(version, encoded.into(), ttl)
        .await
        .unwrap();
    assert!(store.advance_latest(version).await.unwrap());
}

/// Writes snapshot `version` holding one namespace chunk.
async fn write(store: &MemorySnapshotStore, version: u64, timeout: &str) {
    write_snapshot(store, version, &[Chunk::Namespace(namespace(timeout))]).await;
}

/// An announcement whose change set names a marker host no diff would find.
fn event(version: u64, base: u64) -> SnapshotEvent {
    let keys = BTreeSet::from([ChangeKey::Host("marker".into())]);
    SnapshotEvent {
        version,
        base,
        changes: ChangeSet::of(true, keys, TriggerReason::ConfigUpdate, SystemTime::now()),
    }
}

async fn next(updates: &mut mpsc::Receiver<SnapshotUpdate>) -> SnapshotUpdate {
    tokio::time::timeout(Duration::from_secs(5), updates.recv())
        .await
        .expect("an update in time")
        .expect("puller running")
}

/// A puller on `store` and `bus`, driven by announcements (it polls hourly).
struct Running {
    announced: Arc<AtomicU64>,
    updates: mpsc::Receiver<SnapshotUpdate>,
    _push: tokio::sync::watch::Receiver<Arc<shoal_proto::push_context::PushContext>>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start(store: &Arc<MemorySnapshotStore>, bus: &Arc<MemoryBus>) -> Running {
        let config = PullerConfig {
            poll_interval: Duration::from_secs(3600),
            ..PullerConfig::default()
        };
        let (puller, push, updates) = SnapshotPuller::new(
            config,
            store.clone(),
            bus.clone(),
            8,
            &mut Registry::default(),
        );
        let announced = puller.announced();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(puller.run(async move {
            let _ = stopped.await;
        }));
        Running {
            announced,
            updates,
            _push: push,
            stop,
            task,
        }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap();
    }
}

#[tokio::test]
async fn the_builders_change_set_is_used_only_from_its_base() {
    let store = Arc::new(MemorySnapshotStore::new());
    let bus = Arc::new(MemoryBus::default());
    write(&store, 1, "1s").await;
    let mut puller = Running::start(&store, &bus);
    let (announced_version, updates) = (puller.announced.clone(), &mut puller.updates);

    let first = next(updates).await;
    assert_eq!(first.push.version(), 1);
    // What is known to exist, pulled or not (the store's latest here).
    assert_eq!(announced_version.load(Ordering::Acquire), 1);
    assert!(first.changes.full && first.changes.is_everything());

    // Announced relative to the snapshot held: taken as it is.
    write(&store, 2, "2s").await;
    bus.publish_snapshot(&event(2, 1)).await.unwrap();
    let second = next(updates).await;
    assert_eq!(second.push.version(), 2);
    assert_eq!(second.changes.keys, event(2, 1).changes.keys);

    // Announced relative to a snapshot this edge never held: its own diff, with the
    // announcement's start.
    write(&store, 4, "4s").await;
    let announced = event(4, 3);
    bus.publish_snapshot(&announced).await.unwrap();
    let third = next(updates).await;
    assert_eq!(third.push.version(), 4);
    assert_eq!(announced_version.load(Ordering::Acquire), 4);
    assert!(third.changes.full);
    assert_eq!(
        third.changes.keys,
        BTreeSet::from([ChangeKey::Host(HOST.into())])
    );
    assert_eq!(
        third.changes.start_unix_nanos,
        announced.changes.start_unix_nanos
    );

    puller.stop().await;
}

#[tokio::test]
async fn a_replaced_snapshot_is_freed_once_nothing_holds_it() {
    let store = Arc::new(MemorySnapshotStore::new());
    let bus = Arc::new(MemoryBus::default());
    write(&store, 1, "1s").await;
    let mut puller = Running::start(&store, &bus);
    let updates = &mut puller.updates;

    let first = Arc::downgrade(&next(updates).await.push);
    write(&store, 2, "2s").await;
    bus.publish_snapshot(&event(2, 1)).await.unwrap();
    assert_eq!(next(updates).await.push.version(), 2);
    // Dropped off the puller's task, so not at once.
    tokio::time::timeout(Duration::from_secs(5), async {
        while first.upgrade().is_some() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("snapshot 1 freed");
    puller.stop().await;
}

/// The puller's fetch counters, read as an operator would (`/metrics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Fetched {
    pages: u64,
    chunks: u64,
    bytes: u64,
}

impl Fetched {
    fn read(registry: &Registry) -> Fetched {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        let counter = |name: &str| -> u64 {
            let name = format!("shoal_edge_snapshot_{name}_total ");
            text.lines()
                .find_map(|l| l.strip_prefix(&name))
                .unwrap_or_else(|| panic!("{name}in {text}"))
                .parse()
                .unwrap()
        };
        Fetched {
            pages: counter("pages_fetched"),
            chunks: counter("chunks_fetched"),
            bytes: counter("bytes_fetched"),
        }
    }

    fn since(self, before: Fetched) -> Fetched {
        Fetched {
            pages: self.pages - before.pages,
            chunks: self.chunks - before.chunks,
            bytes: self.bytes - before.bytes,
        }
    }
}

/// The in-process store, counting the edge's reads: each call is one round trip to Redis
/// (`get_chunks` is one MGET while the puller's batch is no larger than the store's).
#[derive(Default)]
struct Counted {
    store: MemorySnapshotStore,
    reads: AtomicU64,
}

#[async_trait::async_trait]
impl SnapshotStore for Counted {
    async fn missing_chunks(&self, hashes: &[ChunkHash]) -> StoreResult<Vec<ChunkHash>> {
        self.store.missing_chunks(hashes).await
    }
    async fn put_chunks(&self, chunks: &[(ChunkHash, Bytes)], ttl: Duration) -> StoreResult<()> {
        self.store.put_chunks(chunks, ttl).await
    }
    async fn refresh_chunks(&self, hashes: &[ChunkHash], ttl: Duration) -> StoreResult<()> {
        self.store.refresh_chunks(hashes, ttl).await
    }
    async fn get_chunks(&self, hashes: &[ChunkHash]) -> StoreResult<Vec<Option<Bytes>>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.store.get_chunks(hashes).await
    }
    async fn put_manifest(&self, version: u64, manifest: Bytes, ttl: Duration) -> StoreResult<()> {
        self.store.put_manifest(version, manifest, ttl).await
    }
    async fn get_manifest(&self, version: u64) -> StoreResult<Option<Bytes>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.store.get_manifest(version).await
    }
    async fn advance_latest(&self, version: u64) -> StoreResult<bool> {
        self.store.advance_latest(version).await
    }
    async fn latest(&self) -> StoreResult<Option<u64>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.store.latest().await
    }
}

/// What one edge fetched: its first sync, and one endpoint change of a typical service
/// and of the service whose pages are the largest (the worst case).
struct ChangeFetched {
    depth: u8,
    first_sync: Fetched,
    first_sync_reads: u64,
    typical: Fetched,
    worst: Fetched,
}

/// Moves the first endpoint of the service `key` in `chunks`.
fn move_endpoint(chunks: &mut [Chunk], key: &ServiceKey, address: &str) {
    let eps = chunks
        .iter_mut()
        .find_map(|c| match c {
            Chunk::Endpoints(e) if e.service == *key => Some(e),
            _ => None,
        })
        .expect("the service's endpoints chunk");
    eps.endpoints[0].address = address.into();
}

/// What one edge fetches when one endpoint of a meshgen mesh of `services` services
/// moves: the root manifest, the page that lists the service and the index page above
/// it at each level, its endpoints chunk.
async fn one_endpoint_change(services: usize) -> ChangeFetched {
    let mesh = Mesh::generate(&MeshSpec {
        services,
        endpoints_per_service: 10,
        namespaces: 10,
        vs_fraction: 0.0,
        dr_fraction: 0.0,
        ..MeshSpec::default()
    });
    let mut chunks = fixtures::chunks(&mesh);
    let counted = Arc::new(Counted::default());
    let store = &counted.store;
    let bus = Arc::new(MemoryBus::default());
    write_snapshot(store, 1, &chunks).await;
    let config = PullerConfig {
        poll_interval: Duration::from_secs(3600),
        ..PullerConfig::default()
    };
    let mut registry = Registry::default();
    let (puller, _push, mut updates) =
        SnapshotPuller::new(config, counted.clone(), bus.clone(), 8, &mut registry);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(puller.run(async move {
        let _ = stopped.await;
    }));
    let first = next(&mut updates).await;
    assert_eq!(first.push.version(), 1);
    let first_sync = Fetched::read(&registry);
    let first_sync_reads = counted.reads.load(Ordering::Relaxed);
    assert_eq!(
        first_sync.chunks as usize,
        chunks.len(),
        "everything at first"
    );

    // The worst case: the service whose leaf and index pages are the largest.
    let pages = fixtures::pages(&chunks);
    let path_bytes = |key: &ServiceKey| -> usize {
        let path = pages.path(&ChunkKey::Endpoints(key.clone()));
        path.iter().map(|(_, b)| b.len()).sum()
    };
    let keys = mesh.services.iter().map(|svc| ServiceKey {
        hostname: svc.hostname.clone(),
        namespace: svc.namespace.clone(),
    });
    let worst = keys.clone().max_by_key(path_bytes).expect("services");
    let typical = keys.clone().nth(1).expect("services");
    let depth = pages.depth();
    let mut fetched = Vec::new();
    for (version, key) in [(2, typical), (3, worst)] {
        let before = Fetched::read(&registry);
        move_endpoint(&mut chunks, &key, "10.250.0.1");
        write_snapshot(store, version, &chunks).await;
        let changes = ChangeSet::of(
            false,
            BTreeSet::from([ChangeKey::Service(key.clone())]),
            TriggerReason::EndpointUpdate,
            SystemTime::now(),
        );
        bus.publish_snapshot(&SnapshotEvent {
            version,
            base: version - 1,
            changes,
        })
        .await
        .unwrap();
        let update = next(&mut updates).await;
        assert_eq!(update.push.version(), version);
        let served = update
            .push
            .endpoints(&key)
            .expect("the service's endpoints");
        assert!(served.endpoints.iter().any(|e| e.address == "10.250.0.1"));
        fetched.push(Fetched::read(&registry).since(before));
    }
    let _ = stop.send(());
    task.await.unwrap();
    let root_refs = fixtures::stored(3, &chunks).0.pages.len();
    let levels = pages.levels();
    let level_bytes: Vec<usize> = levels
        .iter()
        .map(|level| level.iter().map(|(_, b)| b.len()).sum())
        .collect();
    eprintln!(
        "{services} services: root {} B, pages by level from the leaves up {level_bytes:?} \
         B; a root listing every leaf page (format 8) would be {} B",
        pages.manifest(1, 0).encode().unwrap().len(),
        flat_root_bytes(&levels)
    );
    eprintln!(
        "{services} services ({} chunks, {} leaf pages, {depth} index level(s), root of \
         {root_refs} refs): first sync fetched {} pages, {} chunks, {} B in \
         {first_sync_reads} store reads; one endpoint change, typical: {} page(s), {} \
         chunk(s), {} B; worst: {} page(s), {} chunk(s), {} B (root manifest included)",
        chunks.len(),
        pages.page_count(),
        first_sync.pages,
        first_sync.chunks,
        first_sync.bytes,
        fetched[0].pages,
        fetched[0].chunks,
        fetched[0].bytes,
        fetched[1].pages,
        fetched[1].chunks,
        fetched[1].bytes,
    );
    ChangeFetched {
        depth,
        first_sync,
        first_sync_reads,
        typical: fetched[0],
        worst: fetched[1],
    }
}

/// The size of a root that lists every leaf page itself (format 8's, the same bytes but
/// for the depth), from the index pages of a one-level tree.
fn flat_root_bytes(levels: &[Vec<&shoal_proto::snapshot::Encoded>]) -> usize {
    let pages = match levels {
        [_] => return 0,
        [_, index] => index
            .iter()
            .flat_map(|(h, b)| IndexPage::decode(h, b).unwrap().pages)
            .collect(),
        _ => return 0,
    };
    let flat = Manifest {
        version: 1,
        built_unix_nanos: 0,
        depth: 0,
        pages,
    };
    flat.encode().unwrap().len() - 1
}

/// One page per level and one chunk, under 16 KiB, for whichever service changes.
fn assert_bounded(fetched: &ChangeFetched) {
    for change in [fetched.typical, fetched.worst] {
        assert_eq!(
            (change.pages, change.chunks),
            (u64::from(fetched.depth) + 1, 1)
        );
        assert!(change.bytes < 16 * 1024, "{} B fetched", change.bytes);
    }
}

#[tokio::test]
async fn one_endpoint_change_fetches_one_page_and_one_chunk_at_1k_services() {
    let fetched = one_endpoint_change(1_000).await;
    assert_eq!(fetched.depth, 0, "the root lists the 16 leaf pages");
    assert_bounded(&fetched);
}

#[tokio::test]
async fn one_endpoint_change_fetches_under_16_kib_at_10k_services() {
    let fetched = one_endpoint_change(10_000).await;
    assert_eq!(fetched.depth, 1, "256 leaf pages under 4 index pages");
    assert_bounded(&fetched);
    // latest, the root, the 4 index pages, the 256 leaf pages, the chunks 512 at a time.
    assert_eq!(fetched.first_sync.pages, 4 + 256);
    assert_eq!(
        fetched.first_sync_reads,
        1 + 1 + 1 + 1 + 10_010_u64.div_ceil(512)
    );
}

#[tokio::test]
async fn one_endpoint_change_fetches_under_16_kib_at_100k_services() {
    let fetched = one_endpoint_change(100_000).await;
    assert_eq!(fetched.depth, 1, "2,048 leaf pages under 32 index pages");
    assert_bounded(&fetched);
    // latest, the root, the index pages, the leaf pages and the chunks 512 at a time.
    assert_eq!(fetched.first_sync.pages, 32 + 2_048);
    assert_eq!(
        fetched.first_sync_reads,
        1 + 1 + 1 + 2_048_u64.div_ceil(512) + 100_010_u64.div_ceil(512)
    );
}

/// An edge of this build reading a root another format wrote (the flat page list of
/// format 8, or a newer format) refuses it, counts the error and stays unsynced rather
/// than serving a misread snapshot.
#[tokio::test]
async fn a_root_of_another_format_is_refused() {
    let store = Arc::new(MemorySnapshotStore::new());
    let bus = Arc::new(MemoryBus::default());
    let (manifest, _) = fixtures::stored(1, &[Chunk::Namespace(namespace("1s"))]);
    let mut bytes = manifest.encode().unwrap();
    bytes[0] = shoal_proto::snapshot::FORMAT_VERSION - 1;
    let ttl = Duration::from_secs(60);
    store.put_manifest(1, bytes.into(), ttl).await.unwrap();
    assert!(store.advance_latest(1).await.unwrap());
    let config = PullerConfig {
        poll_interval: Duration::from_secs(3600),
        ..PullerConfig::default()
    };
    let mut registry = Registry::default();
    let (puller, push, _updates) =
        SnapshotPuller::new(config, store.clone(), bus, 8, &mut registry);
    let synced = puller.synced();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(puller.run(async move {
        let _ = stopped.await;
    }));
    let errors = || {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("shoal_edge_snapshot_errors_total "))
            .map(|v| v.parse::<u64>().unwrap())
            .unwrap_or(0)
    };
    tokio::time::timeout(Duration::from_secs(5), async {
        while errors() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the pull fails");
    assert!(!synced.load(Ordering::Acquire));
    assert_eq!(push.borrow().version(), 0, "nothing served");
    let _ = stop.send(());
    task.await.unwrap();
}
