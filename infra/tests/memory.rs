//! The in-process twins against the conformance checks, plus what only they promise
//! (publish back-pressure, explicit snapshot lag).

mod conformance;

use conformance::{bus, kv, membership, next, store};
use shoal_infra::memory::{
    MemoryBus, MemoryBusConfig, MemoryConfigKv, MemoryMembership, MemorySnapshotStore,
};
use shoal_proto::transport::{Bus, TransportError};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn kv_revisions_and_entries() {
    kv::revisions_and_entries(Arc::new(MemoryConfigKv::default())).await;
}

#[tokio::test]
async fn kv_watch_replays_latest_with_tombstones() {
    kv::watch_replays_latest_with_tombstones(Arc::new(MemoryConfigKv::default())).await;
}

#[tokio::test]
async fn kv_watch_live_in_revision_order() {
    kv::watch_live_in_revision_order(Arc::new(MemoryConfigKv::default())).await;
}

#[tokio::test]
async fn bus_push_kept_until_consumed() {
    bus::push_kept_until_consumed(Arc::new(MemoryBus::default())).await;
}

#[tokio::test]
async fn bus_push_shared_between_consumers() {
    bus::push_shared_between_consumers(Arc::new(MemoryBus::default())).await;
}

#[tokio::test]
async fn bus_snapshot_events_fan_out() {
    bus::snapshot_events_fan_out(Arc::new(MemoryBus::default())).await;
}

#[tokio::test]
async fn bus_full_push_queue_makes_publishers_wait() {
    let bus = MemoryBus::new(MemoryBusConfig {
        push_capacity: 2,
        ..Default::default()
    });
    bus.publish_push(&bus::request(1)).await.unwrap();
    bus.publish_push(&bus::request(2)).await.unwrap();
    let request = bus::request(3);
    let third = bus.publish_push(&request);
    tokio::pin!(third);
    assert!(
        tokio::time::timeout(Duration::from_millis(200), &mut third)
            .await
            .is_err(),
        "a full queue must not drop or accept more"
    );
    let mut requests = bus.push_requests().await.unwrap();
    let first = next(&mut requests, "request 1").await.unwrap();
    assert_eq!(first.message.revision, 1);
    third.await.unwrap();
    for revision in [2, 3] {
        let d = next(&mut requests, "queued request").await.unwrap();
        assert_eq!(d.message.revision, revision);
    }
}

#[tokio::test]
async fn bus_snapshot_lag_is_reported() {
    let bus = MemoryBus::new(MemoryBusConfig {
        snapshot_capacity: 2,
        ..Default::default()
    });
    let mut events = bus.snapshot_events().await.unwrap();
    for version in 1..=5 {
        let event = shoal_proto::transport::SnapshotEvent {
            version,
            base: 0,
            changes: Default::default(),
        };
        bus.publish_snapshot(&event).await.unwrap();
    }
    match next(&mut events, "lag").await {
        Err(TransportError::Lagged(3)) => {}
        other => panic!("expected Lagged(3), got {:?}", other.map(|e| e.version)),
    }
    let after = next(&mut events, "event after lag").await.unwrap();
    assert_eq!(after.version, 4);
}

#[tokio::test]
async fn store_chunks_missing_put_get() {
    store::chunks_missing_put_get(Arc::new(MemorySnapshotStore::new())).await;
}

#[tokio::test]
async fn store_many_chunks_round_trip() {
    store::many_chunks_round_trip(Arc::new(MemorySnapshotStore::new())).await;
}

#[tokio::test]
async fn store_chunk_ttl_and_refresh() {
    store::chunk_ttl_and_refresh(Arc::new(MemorySnapshotStore::new())).await;
}

#[tokio::test]
async fn store_manifests_with_ttl() {
    store::manifests_with_ttl(Arc::new(MemorySnapshotStore::new())).await;
}

#[tokio::test]
async fn store_latest_only_moves_forward() {
    store::latest_only_moves_forward(Arc::new(MemorySnapshotStore::new())).await;
}

#[tokio::test]
async fn store_latest_concurrent_advances() {
    store::latest_concurrent_advances(Arc::new(MemorySnapshotStore::new())).await;
}

#[tokio::test]
async fn membership_sorted_and_leave() {
    membership::members_sorted_and_leave(Arc::new(MemoryMembership::default())).await;
}

#[tokio::test]
async fn membership_watch_replays_then_follows() {
    let ttl = Duration::from_secs(15);
    membership::watch_replays_then_follows(Arc::new(MemoryMembership::new(ttl)), ttl).await;
}

#[tokio::test]
async fn membership_heartbeat_ttl() {
    let ttl = Duration::from_millis(500);
    membership::heartbeat_ttl(Arc::new(MemoryMembership::new(ttl)), ttl).await;
}
