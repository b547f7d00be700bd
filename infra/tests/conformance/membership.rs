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
