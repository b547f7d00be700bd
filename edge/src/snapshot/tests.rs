//! The puller over the in-process bus and store: which change set reaches the
//! dispatcher — the builder's when the edge holds its base, the edge's own diff
//! otherwise — and what one endpoint change makes an edge fetch (the root manifest, one
//! page, one chunk).
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
use shoal_proto::snapshot::Chunk;
use shoal_proto::transport::{Bus, SnapshotEvent, SnapshotStore};
use shoal_test_support::fixtures;
use shoal_test_support::meshgen::{Mesh, MeshSpec};
use std::collections::BTreeSet;
use std::sync::Arc;
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

#[tokio::test]
async fn the_builders_change_set_is_used_only_from_its_base() {
    let store = Arc::new(MemorySnapshotStore::new());
    let bus = Arc::new(MemoryBus::default());
    write(&store, 1, "1s").await;
    let config = PullerConfig {
        poll_interval: Duration::from_secs(3600),
        ..PullerConfig::default()
    };
    let (puller, _push, mut updates) = SnapshotPuller::new(
        config,
        store.clone(),
        bus.clone(),
        8,
        &mut Registry::default(),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(puller.run(async move {
        let _ = stopped.await;
    }));

    let first = next(&mut updates).await;
    assert_eq!(first.push.version(), 1);
    assert!(first.changes.full && first.changes.is_everything());

    // Announced relative to the snapshot held: taken as it is.
    write(&store, 2, "2s").await;
    bus.publish_snapshot(&event(2, 1)).await.unwrap();
    let second = next(&mut updates).await;
    assert_eq!(second.push.version(), 2);
    assert_eq!(second.changes.keys, event(2, 1).changes.keys);

    // Announced relative to a snapshot this edge never held: its own diff, with the
    // announcement's start.
    write(&store, 4, "4s").await;
    let announced = event(4, 3);
    bus.publish_snapshot(&announced).await.unwrap();
    let third = next(&mut updates).await;
    assert_eq!(third.push.version(), 4);
    assert!(third.changes.full);
    assert_eq!(
        third.changes.keys,
        BTreeSet::from([ChangeKey::Host(HOST.into())])
    );
    assert_eq!(
        third.changes.start_unix_nanos,
        announced.changes.start_unix_nanos
    );

    let _ = stop.send(());
    task.await.unwrap();
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

/// What one edge fetches when one endpoint of a meshgen mesh of `services` services
/// moves: the root manifest, the page that lists the service, its endpoints chunk.
async fn one_endpoint_change(services: usize) -> Fetched {
    let mesh = Mesh::generate(&MeshSpec {
        services,
        endpoints_per_service: 10,
        namespaces: 10,
        vs_fraction: 0.0,
        dr_fraction: 0.0,
        ..MeshSpec::default()
    });
    let mut chunks = fixtures::chunks(&mesh);
    let store = Arc::new(MemorySnapshotStore::new());
    let bus = Arc::new(MemoryBus::default());
    write_snapshot(&store, 1, &chunks).await;
    let config = PullerConfig {
        poll_interval: Duration::from_secs(3600),
        ..PullerConfig::default()
    };
    let mut registry = Registry::default();
    let (puller, _push, mut updates) =
        SnapshotPuller::new(config, store.clone(), bus.clone(), 8, &mut registry);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(puller.run(async move {
        let _ = stopped.await;
    }));
    let first = next(&mut updates).await;
    assert_eq!(first.push.version(), 1);
    let synced = Fetched::read(&registry);
    assert_eq!(synced.chunks as usize, chunks.len(), "everything at first");

    // Move the first endpoint of one service.
    let svc = &mesh.services[1];
    let eps = chunks
        .iter_mut()
        .find_map(|c| match c {
            Chunk::Endpoints(e) if e.service.hostname == svc.hostname => Some(e),
            _ => None,
        })
        .expect("the service's endpoints chunk");
    eps.endpoints[0].address = "10.250.0.1".into();
    let key = ServiceKey {
        hostname: svc.hostname.clone(),
        namespace: svc.namespace.clone(),
    };
    write_snapshot(&store, 2, &chunks).await;
    let changes = ChangeSet::of(
        false,
        BTreeSet::from([ChangeKey::Service(key.clone())]),
        TriggerReason::EndpointUpdate,
        SystemTime::now(),
    );
    bus.publish_snapshot(&SnapshotEvent {
        version: 2,
        base: 1,
        changes,
    })
    .await
    .unwrap();
    let second = next(&mut updates).await;
    assert_eq!(second.push.version(), 2);
    let served = second
        .push
        .endpoints(&key)
        .expect("the service's endpoints");
    assert!(served.endpoints.iter().any(|e| e.address == "10.250.0.1"));
    let fetched = Fetched::read(&registry).since(synced);
    let _ = stop.send(());
    task.await.unwrap();
    let pages = fixtures::stored(2, &chunks).0.pages.len();
    eprintln!(
        "one endpoint change at {services} services ({} chunks, {pages} pages): one edge \
         fetched {} page(s), {} chunk(s), {} B in all (manifest included)",
        chunks.len(),
        fetched.pages,
        fetched.chunks,
        fetched.bytes
    );
    fetched
}

#[tokio::test]
async fn one_endpoint_change_fetches_one_page_and_one_chunk_at_1k_services() {
    let fetched = one_endpoint_change(1_000).await;
    assert_eq!((fetched.pages, fetched.chunks), (1, 1));
    assert!(fetched.bytes < 16 * 1024, "{} B fetched", fetched.bytes);
}

#[tokio::test]
async fn one_endpoint_change_fetches_under_16_kib_at_10k_services() {
    let fetched = one_endpoint_change(10_000).await;
    assert_eq!((fetched.pages, fetched.chunks), (1, 1));
    assert!(fetched.bytes < 16 * 1024, "{} B fetched", fetched.bytes);
}
