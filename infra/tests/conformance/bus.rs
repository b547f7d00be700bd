//! `Bus`: durable shared push queue, redelivery, snapshot fan-out, trace context.

use super::{WAIT, next, nothing_within};
use futures::StreamExt;
use shoal_proto::change::{ChangeKey, ChangeSet, TriggerReason};
use shoal_proto::config::{ConfigKey, Kind};
use shoal_proto::push::PushRequest;
use shoal_proto::transport::{Bus, SnapshotEvent, TraceContext};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

fn trace(n: u64) -> TraceContext {
    TraceContext::from([("traceparent".to_owned(), format!("00-{n:032x}-{n:016x}-01"))])
}

pub fn request(revision: u64) -> PushRequest {
    let key = ConfigKey::new(Kind::VirtualService, "default", format!("vs-{revision}"));
    PushRequest {
        changes: ChangeSet {
            full: revision.is_multiple_of(2),
            keys: BTreeSet::from([ChangeKey::Config(key)]),
            reasons: BTreeMap::from([(TriggerReason::ConfigUpdate, 1)]),
            start_unix_nanos: 1_700_000_000_000_000_000 + revision,
            trace: trace(revision),
            ..Default::default()
        },
        revision,
    }
}

fn event(version: u64) -> SnapshotEvent {
    SnapshotEvent {
        version,
        base: version - 1,
        changes: ChangeSet {
            start_unix_nanos: version,
            trace: trace(version),
            ..ChangeSet::everything(TriggerReason::ConfigUpdate, std::time::UNIX_EPOCH)
        },
    }
}

/// Requests published before any consumer exists are kept and delivered in order, with
/// their trace context.
pub async fn push_kept_until_consumed(bus: Arc<dyn Bus>) {
    for revision in 1..=3 {
        bus.publish_push(&request(revision)).await.unwrap();
    }
    let mut requests = bus.push_requests().await.unwrap();
    for revision in 1..=3 {
        let delivery = next(&mut requests, "push request").await.unwrap();
        assert_eq!(delivery.message, request(revision));
        delivery.acker.ack().await.unwrap();
    }
    nothing_within(&mut requests, Duration::from_millis(300), "more requests").await;
}

/// Two consumers share the queue: every request reaches exactly one of them.
pub async fn push_shared_between_consumers(bus: Arc<dyn Bus>) {
    const N: u64 = 30;
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let mut consumers = Vec::new();
    for consumer in 0..2 {
        let mut requests = bus.push_requests().await.unwrap();
        let tx = tx.clone();
        consumers.push(tokio::spawn(async move {
            while let Some(delivery) = requests.next().await {
                let delivery = delivery.unwrap();
                delivery.acker.ack().await.unwrap();
                if tx
                    .send((consumer, delivery.message.revision))
                    .await
                    .is_err()
                {
                    break;
                }
            }
        }));
    }
    for revision in 1..=N {
        bus.publish_push(&request(revision)).await.unwrap();
    }
    let mut seen = HashSet::new();
    for _ in 0..N {
        let (_, revision) = tokio::time::timeout(WAIT, rx.recv())
            .await
            .expect("timed out waiting for shared requests")
            .unwrap();
        assert!(seen.insert(revision), "request {revision} delivered twice");
    }
    assert_eq!(seen, (1..=N).collect());
    let extra = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await;
    assert!(extra.is_err(), "unexpected extra delivery {extra:?}");
    for consumer in consumers {
        consumer.abort();
    }
}

/// A request not acknowledged within `ack_wait` is delivered again.
pub async fn unacked_push_is_redelivered(bus: Arc<dyn Bus>) {
    bus.publish_push(&request(7)).await.unwrap();
    let mut requests = bus.push_requests().await.unwrap();
    let first = next(&mut requests, "first delivery").await.unwrap();
    assert_eq!(first.message, request(7));
    // Not acked: it must come back after ack_wait.
    let again = next(&mut requests, "redelivery").await.unwrap();
    assert_eq!(again.message, request(7));
    again.acker.ack().await.unwrap();
    drop(first);
}

/// Every subscriber sees every snapshot event published after it subscribed, in order.
pub async fn snapshot_events_fan_out(bus: Arc<dyn Bus>) {
    let mut first = bus.snapshot_events().await.unwrap();
    let mut second = bus.snapshot_events().await.unwrap();
    for version in [10, 11, 12] {
        bus.publish_snapshot(&event(version)).await.unwrap();
    }
    for events in [&mut first, &mut second] {
        for version in [10, 11, 12] {
            assert_eq!(
                next(events, "snapshot event").await.unwrap(),
                event(version)
            );
        }
    }
}
