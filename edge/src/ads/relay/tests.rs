//! Relays between two edges on loopback over mTLS (the fixture of `tls/tests.rs`):
//! their place under `--max-streams`, drain, one session per proxy, and what a ring
//! change does to them.

use crate::ads::XdsConfig;
use crate::membership::Ring;
use crate::rebalance::{self, RebalanceConfig};
use crate::tls::tests::{TestEdge, WEB, client, edge_with, node_owned_by, open, silent_edge};
use crate::xds::types::{LISTENER, ROUTE};
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use shoal_proto::transport::Member;
use shoal_test_support::pki::TestCa;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tonic::{Code, Status, Streaming};

/// Edges `a` and `b` in one ring; proxies reach `a`.
pub(crate) struct Pair {
    pub ca: TestCa,
    pub a: TestEdge,
    pub b: TestEdge,
    pub members: Vec<Member>,
    pub ring: watch::Sender<Arc<Ring>>,
}

/// Listeners for edges `a` and `b`, and the two as ring members.
pub(crate) async fn listeners() -> (TcpListener, TcpListener, Vec<Member>) {
    let (la, lb) = (
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
    );
    let members = [("a", &la), ("b", &lb)]
        .into_iter()
        .map(|(id, l)| Member {
            id: id.into(),
            xds_addr: l.local_addr().unwrap().to_string(),
        })
        .collect();
    (la, lb, members)
}

/// Stream relays: a's proxies' connections are not tunneled (`tunnel/tests.rs`).
async fn pair(config_a: XdsConfig) -> Pair {
    pair_with(XdsConfig {
        relay_connections: false,
        ..config_a
    })
    .await
}

/// Edges a (with `config_a`) and b.
pub(crate) async fn pair_with(config_a: XdsConfig) -> Pair {
    let ca = TestCa::new("mesh");
    let (la, lb, members) = listeners().await;
    let (ring, ring_rx) = watch::channel(Arc::new(Ring::new(members.clone())));
    let a = edge_with(&ca, la, Some(("a", ring_rx.clone())), config_a);
    let b = edge_with(&ca, lb, Some(("b", ring_rx)), XdsConfig::default());
    Pair {
        ca,
        a,
        b,
        members,
        ring,
    }
}

impl Pair {
    /// `n` proxies of namespace `a` that edge b owns.
    pub fn owned_by_b(&self, n: usize) -> Vec<String> {
        let ring = self.ring.borrow().clone();
        (0..10_000)
            .map(|i| {
                format!(
                    "sidecar~10.0.{}.{}~web-{i}.a~a.svc.cluster.local",
                    i / 250,
                    i % 250
                )
            })
            .filter(|id| ring.owner(id).is_some_and(|m| m.id == "b"))
            .take(n)
            .collect()
    }

    /// Opens `node`'s stream on edge a, over a connection of its own.
    pub async fn open(
        &self,
        node: &str,
    ) -> Result<(mpsc::Sender<DiscoveryRequest>, Streaming<DiscoveryResponse>), Status> {
        let web = self.ca.issue(&[], Some(WEB));
        let mut client = client(self.a.addr, &self.ca, Some(&web)).await;
        open(&mut client, node, &[]).await
    }

    /// `node`'s stream, relayed by a to b, through its first response.
    pub async fn relayed(
        &self,
        node: &str,
    ) -> (mpsc::Sender<DiscoveryRequest>, Streaming<DiscoveryResponse>) {
        let (tx, mut responses) = self.open(node).await.expect("relayed");
        responses
            .message()
            .await
            .unwrap()
            .expect("a CDS response, relayed");
        (tx, responses)
    }
}

/// The status that ends `responses` (within 5 s).
pub(crate) async fn closing_status(responses: &mut Streaming<DiscoveryResponse>) -> Status {
    let end = async {
        loop {
            match responses.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("the stream ended OK"),
                Err(status) => return status,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), end)
        .await
        .expect("the stream ends")
}

pub(crate) async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..250 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("not within 5 s: {what}");
}

#[tokio::test]
async fn a_relay_holds_its_place_under_max_streams() {
    let p = pair(XdsConfig {
        max_streams: 1,
        ..Default::default()
    })
    .await;
    let nodes = p.owned_by_b(2);
    let _held = p.relayed(&nodes[0]).await;
    assert_eq!(p.a.xds.relayed(), 1);
    let status = p.open(&nodes[1]).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status}");
}

#[tokio::test]
async fn a_draining_edge_ends_its_relays_and_refuses_new_ones() {
    let p = pair(XdsConfig::default()).await;
    let nodes = p.owned_by_b(2);
    let (_tx, mut responses) = p.relayed(&nodes[0]).await;
    // The dispatcher's shutdown: the edge drains.
    let (_updates_tx, updates) = mpsc::channel(1);
    p.a.xds.run_dispatcher(updates, async {}).await;
    let status = closing_status(&mut responses).await;
    assert_eq!(status.code(), Code::Unavailable, "{status}");
    assert!(status.message().contains("draining"), "{status}");
    eventually("a relays nothing", || p.a.xds.relayed() == 0).await;
    let refused = p.open(&nodes[1]).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused}");
}

#[tokio::test]
async fn a_second_relayed_stream_of_a_proxy_replaces_the_first() {
    let p = pair(XdsConfig::default()).await;
    let node = &p.owned_by_b(1)[0];
    let (_tx1, mut first) = p.relayed(node).await;
    let (_tx2, _second) = p.relayed(node).await;
    let status = closing_status(&mut first).await;
    assert_eq!(status.code(), Code::Unavailable, "{status}");
    assert!(status.message().contains("replaced"), "{status}");
    eventually("a relays one stream", || p.a.xds.relayed() == 1).await;
    eventually("b serves one stream", || p.b.xds.connected() == 1).await;
}

/// b leaves the ring: the rebalance task hands off a's relays to b (the proxies
/// reconnect, to be served by their new owner) and forgets a's connection to b.
#[tokio::test]
async fn relays_to_an_edge_that_left_are_handed_off_and_its_connection_forgotten() {
    let p = pair(XdsConfig::default()).await;
    let node = &p.owned_by_b(1)[0];
    let (_tx, mut responses) = p.relayed(node).await;
    assert_eq!(
        p.a.xds.shared.relays.connection_addrs(),
        [p.members[1].xds_addr.clone()]
    );
    let config = RebalanceConfig {
        rate: 100.0,
        settle: Duration::ZERO,
        rehome_every: Duration::ZERO,
    };
    let task = tokio::spawn(rebalance::run(
        p.a.xds.clone(),
        p.ring.subscribe(),
        config,
        std::future::pending(),
    ));
    p.ring
        .send_replace(Arc::new(Ring::new(vec![p.members[0].clone()])));
    let status = closing_status(&mut responses).await;
    assert_eq!(status.code(), Code::Unavailable, "{status}");
    assert!(status.message().contains("handed off"), "{status}");
    eventually("a relays nothing", || p.a.xds.relayed() == 0).await;
    assert!(p.a.xds.shared.relays.connection_addrs().is_empty());
    task.abort();
}

#[tokio::test]
async fn a_live_owner_that_does_not_take_the_stream_sends_the_proxy_back_not_served_here() {
    let ca = TestCa::new("mesh");
    let (la, lb, members) = listeners().await;
    let ring = Arc::new(Ring::new(members));
    let (_ring_tx, ring_rx) = watch::channel(ring.clone());
    let config = XdsConfig {
        relay_open_timeout: Duration::from_millis(300),
        relay_connections: false,
        ..Default::default()
    };
    let a = edge_with(&ca, la, Some(("a", ring_rx)), config);
    silent_edge(&ca, lb);
    let node = node_owned_by(&ring, "b");
    let web = ca.issue(&[], Some(WEB));
    let mut proxy = client(a.addr, &ca, Some(&web)).await;
    let status = open(&mut proxy, &node, &[]).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status}");
    assert!(
        status.message().contains("did not take the stream"),
        "{status}"
    );
    // Not served here, where the next re-home would only move it again.
    assert_eq!(a.xds.relayed(), 0);
    assert_eq!(a.xds.shared.registry.len(), 0);
}

/// Requests after the first pass through undecoded: the owner reads them (a type first
/// asked for later is answered through the relay), and one the relaying edge cannot take
/// still ends the relay with the status a served stream would get.
#[tokio::test]
async fn later_requests_reach_the_owner_undecoded_and_an_oversized_one_ends_the_relay() {
    let p = pair(XdsConfig {
        max_request_bytes: 64 * 1024,
        ..Default::default()
    })
    .await;
    let node = &p.owned_by_b(1)[0];
    let (tx, mut responses) = p.relayed(node).await;
    assert_eq!(p.a.xds.relayed(), 1);
    tx.send(DiscoveryRequest {
        type_url: LISTENER.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let lds = responses.message().await.unwrap().expect("relayed");
    assert_eq!(lds.type_url, LISTENER);
    tx.send(DiscoveryRequest {
        type_url: ROUTE.into(),
        resource_names: vec!["r".repeat(100 * 1024)],
        ..Default::default()
    })
    .await
    .unwrap();
    let status = closing_status(&mut responses).await;
    assert_eq!(status.code(), Code::ResourceExhausted, "{status}");
    assert!(
        status.message().contains("SHOAL_XDS_MAX_REQUEST_BYTES"),
        "{status}"
    );
}
