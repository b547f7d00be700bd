use super::*;
use shoal_proto::change::{ChangeSet, TriggerReason};
use shoal_proto::config::{ConfigKey, Kind};
use shoal_proto::push_context::PushContext;
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

fn key(name: &str) -> ConfigKey {
    ConfigKey::new(Kind::VirtualService, "ns", name)
}

fn ev(version: u64, full: bool, keys: &[&str], start_s: u64) -> PushEvent {
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(start_s);
    let keys = keys.iter().map(|k| key(k).into()).collect();
    PushEvent::new(
        Arc::new(PushContext::from_chunks(version, [])),
        Arc::new(ChangeSet::of(full, keys, TriggerReason::Unknown, at)),
    )
}

fn names(e: &PushEvent) -> BTreeSet<String> {
    e.changes.config_keys().map(|k| k.name.clone()).collect()
}

#[test]
fn merge_follows_istio() {
    let m = ev(1, false, &["a"], 10).merge(ev(2, true, &["b"], 20));
    assert!(m.full());
    assert_eq!(m.push.version(), 2);
    assert_eq!(m.start(), SystemTime::UNIX_EPOCH + Duration::from_secs(10));
    assert_eq!(names(&m), BTreeSet::from(["a".into(), "b".into()]));

    // Either side empty means "everything".
    assert!(
        ev(1, false, &[], 1)
            .merge(ev(2, false, &["b"], 2))
            .changes
            .is_everything()
    );
    assert!(
        ev(1, false, &["a"], 1)
            .merge(ev(2, false, &[], 2))
            .changes
            .is_everything()
    );
    // The newest push context wins even if events arrive out of order.
    assert_eq!(
        ev(5, false, &["a"], 1)
            .merge(ev(4, false, &["b"], 2))
            .push
            .version(),
        5
    );
    assert!(
        !ev(1, false, &["a"], 1)
            .merge(ev(2, false, &["a"], 2))
            .full()
    );
}

#[tokio::test(start_paused = true)]
async fn one_entry_per_connection_merged_fifo_across_connections() {
    let q = PushQueue::<u64, PushEvent>::new();
    q.enqueue(1, ev(1, false, &["a"], 1));
    q.enqueue(2, ev(1, false, &["x"], 1));
    q.enqueue(1, ev(2, true, &["b"], 2));
    assert_eq!(q.pending(), 2);

    let (k, e) = q.dequeue().await.unwrap();
    assert_eq!(k, 1);
    assert!(e.full());
    assert_eq!(names(&e), BTreeSet::from(["a".into(), "b".into()]));
    let (k, _) = q.dequeue().await.unwrap();
    assert_eq!(k, 2);
    assert_eq!(q.pending(), 0);
    assert_eq!(q.in_progress(), 2);
}

#[tokio::test(start_paused = true)]
async fn requeued_after_done_when_enqueued_while_in_progress() {
    let q = PushQueue::<u64, PushEvent>::new();
    q.enqueue(1, ev(1, false, &["a"], 1));
    let (k, _) = q.dequeue().await.unwrap();
    assert_eq!(k, 1);

    // While 1 is being pushed, two more events arrive: stashed and merged, not queued.
    q.enqueue(1, ev(2, false, &["b"], 2));
    q.enqueue(1, ev(3, true, &["c"], 3));
    q.enqueue(2, ev(3, false, &["z"], 3));
    assert_eq!(q.pending(), 1);
    assert!(
        tokio::time::timeout(Duration::from_secs(1), async {
            let (k, _) = q.dequeue().await.unwrap();
            assert_eq!(k, 2);
            q.dequeue().await
        })
        .await
        .is_err(),
        "connection 1 must not be dequeued while in progress"
    );

    q.mark_done(&1);
    let (k, e) = q.dequeue().await.unwrap();
    assert_eq!(k, 1);
    assert!(e.full());
    assert_eq!(e.push.version(), 3);
    assert_eq!(names(&e), BTreeSet::from(["b".into(), "c".into()]));

    // Done without anything new: nothing is re-queued.
    q.mark_done(&1);
    q.mark_done(&1);
    assert_eq!(q.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn removed_connections_are_skipped() {
    let q = PushQueue::<u64, PushEvent>::new();
    q.enqueue(1, ev(1, false, &["a"], 1));
    q.enqueue(2, ev(1, false, &["a"], 1));
    q.remove(&1);
    assert_eq!(q.dequeue().await.unwrap().0, 2);
    q.remove(&2);
    q.mark_done(&2);
    assert_eq!(q.pending(), 0);
    assert_eq!(q.in_progress(), 0);
}

#[tokio::test(start_paused = true)]
async fn dequeue_waits_for_enqueue_and_close_wakes_waiters() {
    let q = Arc::new(PushQueue::<u64, PushEvent>::new());
    let waiter = tokio::spawn({
        let q = q.clone();
        async move { q.dequeue().await.map(|(k, _)| k) }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    q.enqueue(7, ev(1, true, &[], 1));
    assert_eq!(waiter.await.unwrap(), Some(7));

    let waiter = tokio::spawn({
        let q = q.clone();
        async move { q.dequeue().await.map(|(k, _)| k) }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    q.close();
    assert_eq!(waiter.await.unwrap(), None);
    q.enqueue(8, ev(1, true, &[], 1));
    assert_eq!(q.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn throttle_bounds_pushes_in_flight() {
    let q = Arc::new(PushQueue::<u64, PushEvent>::new());
    let throttle = Arc::new(Semaphore::new(2));
    for c in 1..=3 {
        q.enqueue(c, ev(1, true, &[], 1));
    }
    let (k1, _, g1) = q.dequeue_throttled(&throttle).await.unwrap();
    let (k2, _, _g2) = q.dequeue_throttled(&throttle).await.unwrap();
    assert_eq!((k1, k2), (1, 2));

    // Third waits: two pushes are in flight.
    let third = tokio::time::timeout(Duration::from_secs(5), q.dequeue_throttled(&throttle)).await;
    assert!(third.is_err());
    assert_eq!(q.pending(), 1);

    // Connection 1 gets a new event while in flight; finishing it re-queues it behind 3.
    q.enqueue(1, ev(2, false, &["a"], 2));
    drop(g1);
    let (k3, _, _g3) = q.dequeue_throttled(&throttle).await.unwrap();
    assert_eq!(k3, 3);
    assert_eq!(q.pending(), 1);
    assert_eq!(throttle.available_permits(), 0);
}
