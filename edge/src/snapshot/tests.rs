//! The puller over the in-process bus and store: which change set reaches the
//! dispatcher — the builder's when the edge holds its base, the edge's own diff
//! otherwise.

use super::{PullerConfig, SnapshotPuller, SnapshotUpdate};
use bytes::Bytes;
use prometheus_client::registry::Registry;
use shoal_infra::memory::{MemoryBus, MemorySnapshotStore};
use shoal_proto::change::{ChangeKey, ChangeSet, TriggerReason};
use shoal_proto::config::istio::{Destination, HttpRoute, HttpRouteDestination, VirtualService};
use shoal_proto::model::{NamedConfig, NamespaceConfig};
use shoal_proto::snapshot::{Chunk, ChunkRef, Manifest};
use shoal_proto::transport::{Bus, SnapshotEvent, SnapshotStore};
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
            spec: vs,
        }],
        ..Default::default()
    }
}

/// Writes snapshot `version` holding one namespace chunk, as a builder does.
async fn write(store: &MemorySnapshotStore, version: u64, timeout: &str) {
    let chunk = Chunk::Namespace(namespace(timeout));
    let (hash, bytes) = chunk.encode().unwrap();
    let ttl = Duration::from_secs(60);
    store
        .put_chunks(&[(hash.clone(), Bytes::from(bytes))], ttl)
        .await
        .unwrap();
    let manifest = Manifest {
        version,
        built_unix_nanos: 0,
        chunks: vec![ChunkRef {
            key: chunk.key(),
            hash,
        }],
    };
    let encoded = manifest.encode().unwrap();
    store
        .put_manifest(version, encoded.into(), ttl)
        .await
        .unwrap();
    assert!(store.advance_latest(version).await.unwrap());
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
