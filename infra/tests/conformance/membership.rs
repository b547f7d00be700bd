//! `Membership`: sorted live members, leave, TTL expiry.

use super::eventually;
use shoal_proto::transport::{Member, Membership};
use std::sync::Arc;
use std::time::Duration;

fn member(id: &str, port: u16) -> Member {
    Member {
        id: id.into(),
        xds_addr: format!("10.0.0.1:{port}"),
    }
}

pub async fn members_sorted_and_leave(m: Arc<dyn Membership>) {
    assert!(m.members().await.unwrap().is_empty());
    for id in ["edge-b", "edge-a", "edge-c"] {
        m.heartbeat(&member(id, 15010)).await.unwrap();
    }
    m.heartbeat(&member("edge-a", 15012)).await.unwrap();
    assert_eq!(
        m.members().await.unwrap(),
        vec![
            member("edge-a", 15012),
            member("edge-b", 15010),
            member("edge-c", 15010)
        ]
    );
    m.leave("edge-b").await.unwrap();
    m.leave("never-joined").await.unwrap();
    assert_eq!(
        m.members().await.unwrap(),
        vec![member("edge-a", 15012), member("edge-c", 15010)]
    );
}

/// A member that stops heartbeating drops out after the TTL; one that keeps beating stays.
pub async fn heartbeat_ttl(m: Arc<dyn Membership>, ttl: Duration) {
    m.heartbeat(&member("silent", 1)).await.unwrap();
    let beating = member("beating", 2);
    m.heartbeat(&beating).await.unwrap();
    assert_eq!(
        m.members().await.unwrap().len(),
        2,
        "both live before the TTL"
    );
    let mut silent_gone = false;
    let until = tokio::time::Instant::now() + ttl * 6;
    while !silent_gone {
        assert!(
            tokio::time::Instant::now() < until,
            "silent member never expired"
        );
        m.heartbeat(&beating).await.unwrap();
        let members = m.members().await.unwrap();
        assert!(
            members.contains(&beating),
            "a beating member must stay: {members:?}"
        );
        silent_gone = members == vec![beating.clone()];
        tokio::time::sleep(ttl / 5).await;
    }
    eventually(ttl * 6, "the last member expires", || async {
        m.members().await.unwrap().is_empty()
    })
    .await;
}

/// A watch replays every live member (with what is left of its TTL), then `Current`,
/// then follows beats and leaves as they happen, ids as written (escaped keys included).
pub async fn watch_replays_then_follows(m: Arc<dyn Membership>, ttl: Duration) {
    use futures::StreamExt;
    use shoal_proto::transport::MemberEvent;
    m.heartbeat(&member("edge.b", 1)).await.unwrap();
    m.heartbeat(&member("edge-a", 2)).await.unwrap();
    let mut events = m.watch().await.unwrap();
    let mut next = async || {
        tokio::time::timeout(super::WAIT, events.next())
            .await
            .expect("a membership event")
            .expect("the watch goes on")
            .expect("no watch error")
    };
    let mut replayed = Vec::new();
    loop {
        match next().await {
            MemberEvent::Beat { member, live_for } => {
                assert!(live_for <= ttl && !live_for.is_zero(), "{live_for:?}");
                replayed.push(member);
            }
            MemberEvent::Current => break,
            other => panic!("a replay holds beats only: {other:?}"),
        }
    }
    replayed.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(replayed, [member("edge-a", 2), member("edge.b", 1)]);

    m.heartbeat(&member("edge-c", 3)).await.unwrap();
    assert!(matches!(
        next().await,
        MemberEvent::Beat { member: joined, .. } if joined == member("edge-c", 3)
    ));
    m.leave("edge.b").await.unwrap();
    assert_eq!(
        next().await,
        MemberEvent::Left {
            id: "edge.b".into()
        }
    );
}
