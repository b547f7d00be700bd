use super::*;
use shoal_infra::memory::MemoryMembership;

fn member(id: &str) -> Member {
    Member {
        id: id.into(),
        xds_addr: format!("{id}:15010"),
    }
}

fn ids(ring: &Ring) -> Vec<String> {
    ring.members().iter().map(|m| m.id.clone()).collect()
}

/// Runs edge `id`'s membership task on `membership`; its ring and its stop switch.
fn start(
    membership: &Arc<MemoryMembership>,
    id: &str,
) -> (watch::Receiver<Arc<Ring>>, tokio::sync::oneshot::Sender<()>) {
    let (ring_tx, ring) = watch::channel(Arc::new(Ring::default()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(run(
        MembershipConfig::default(),
        membership.clone(),
        member(id),
        ring_tx,
        async move {
            let _ = stopped.await;
        },
    ));
    (ring, stop)
}

/// Two edges started together hold each other in their rings as soon as the second has
/// registered, not a heartbeat later: the first must not take the second's proxies as
/// its own meanwhile (and hand them off later, by thousands).
#[tokio::test(start_paused = true)]
async fn an_edge_sees_a_joining_edge_at_once_not_a_heartbeat_later() {
    let membership = Arc::new(MemoryMembership::default());
    let (mut ring_1, _stop_1) = start(&membership, "edge-1");
    assert!(known(&mut ring_1).await);
    assert_eq!(ids(&ring_1.borrow()), ["edge-1"]);

    tokio::time::sleep(Duration::from_millis(100)).await;
    let (mut ring_2, _stop_2) = start(&membership, "edge-2");
    assert!(known(&mut ring_2).await);
    assert_eq!(
        ids(&ring_2.borrow()),
        ["edge-1", "edge-2"],
        "the first ring is read after registering"
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        ids(&ring_1.borrow()),
        ["edge-1", "edge-2"],
        "edge-1 follows the bucket"
    );
}

#[tokio::test(start_paused = true)]
async fn the_ring_is_empty_until_this_edge_registered_and_read_the_members() {
    let membership = Arc::new(MemoryMembership::default());
    membership.heartbeat(&member("edge-0")).await.unwrap();
    let (ring_tx, mut ring) = watch::channel(Arc::new(Ring::default()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(run(
        MembershipConfig::default(),
        membership.clone(),
        member("edge-1"),
        ring_tx,
        async move {
            let _ = stopped.await;
        },
    ));
    assert!(ring.borrow().members().is_empty(), "not ready before");
    assert!(known(&mut ring).await);
    assert_eq!(ids(&ring.borrow()), ["edge-0", "edge-1"]);

    // A leave shows at once; a member that stops beating, after the TTL.
    let mut other = membership.watch().await.unwrap();
    membership.leave("edge-0").await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(ids(&ring.borrow()), ["edge-1"]);
    membership.heartbeat(&member("edge-9")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(ids(&ring.borrow()), ["edge-1", "edge-9"]);
    tokio::time::sleep(Duration::from_secs(16)).await;
    assert_eq!(ids(&ring.borrow()), ["edge-1"], "edge-9 expired");

    // Leaving on the way out: a watcher sees it.
    stop.send(()).unwrap();
    task.await.unwrap();
    let mut left = false;
    while let Some(Some(Ok(event))) = futures::FutureExt::now_or_never(other.next()) {
        left |= event
            == shoal_proto::transport::MemberEvent::Left {
                id: "edge-1".into(),
            };
    }
    assert!(left, "edge-1 left the bucket");
}
