//! Connection relays between two edges on loopback over mTLS (the fixture of
//! `relay/tests.rs`), proxies being real tonic clients with workload certificates.

use super::TunnelService;
use crate::ads::XdsConfig;
use crate::ads::error::Ending;
use crate::ads::relay::tests::{closing_status, eventually, listeners, pair_with};
use crate::membership::Ring;
use crate::tls::PeerInfo;
use crate::tls::tests::{WEB, client, edge_with, node_owned_by, open, silent_edge};
use shoal_proto::security::SpiffeId;
use shoal_test_support::pki::TestCa;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::watch;
use tower_service::Service;

#[tokio::test]
async fn a_connection_is_tunneled_to_its_proxys_owner() {
    let p = pair_with(XdsConfig::default()).await;
    let node = &p.owned_by_b(1)[0];
    let (_tx, _responses) = p.relayed(node).await;
    assert_eq!(p.a.xds.relayed(), 1);
    assert_eq!(p.a.xds.connected(), 0, "a holds no stream of it");
    // The owner serves it as its own connection, with the proxy's certificate.
    let served = p.b.xds.shared.registry.proxy(node).expect("served by b");
    assert_eq!(
        served.proxy.identity.to_string(),
        format!("{WEB} (client-certificate)")
    );
}

#[tokio::test]
async fn a_connection_this_edge_owns_is_served_here() {
    let p = pair_with(XdsConfig::default()).await;
    let node = node_owned_by(&p.ring.borrow(), "a");
    let (_tx, mut responses) = p.open(&node).await.unwrap();
    responses.message().await.unwrap().expect("a CDS response");
    assert_eq!((p.a.xds.connected(), p.a.xds.relayed()), (1, 0));
    assert_eq!(p.b.xds.connected(), 0);
}

#[tokio::test]
async fn ending_a_tunnel_closes_the_proxys_connection_and_the_owners_stream() {
    let p = pair_with(XdsConfig::default()).await;
    let node = &p.owned_by_b(1)[0];
    let (_tx, mut responses) = p.relayed(node).await;
    assert!(p.a.xds.shared.relays.end(node, Ending::HandedOff));
    // The proxy sees its connection close and reconnects through the Service.
    let status = closing_status(&mut responses).await;
    assert!(!status.message().is_empty(), "{status}");
    eventually("a forgets the tunnel", || p.a.xds.relayed() == 0).await;
    eventually("b's stream ends", || p.b.xds.connected() == 0).await;
}

#[tokio::test]
async fn a_proxy_that_goes_away_ends_its_tunnel() {
    let p = pair_with(XdsConfig::default()).await;
    let node = &p.owned_by_b(1)[0];
    let relayed = p.relayed(node).await;
    drop(relayed);
    eventually("a forgets the tunnel", || p.a.xds.relayed() == 0).await;
    eventually("b's stream ends", || p.b.xds.connected() == 0).await;
}

#[tokio::test]
async fn an_owner_that_refuses_leaves_the_proxy_served_where_it_landed() {
    let p = pair_with(XdsConfig::default()).await;
    p.b.xds.shared.refusing.store(true, Ordering::Release);
    let node = &p.owned_by_b(1)[0];
    let (_tx, mut responses) = p.open(node).await.unwrap();
    responses.message().await.unwrap().expect("a CDS response");
    assert_eq!((p.a.xds.connected(), p.a.xds.relayed()), (1, 0));
}

#[tokio::test]
async fn the_later_streams_of_a_tunneled_connection_reach_their_own_owners() {
    let p = pair_with(XdsConfig::default()).await;
    let (of_b, of_a) = (&p.owned_by_b(1)[0], node_owned_by(&p.ring.borrow(), "a"));
    let web = p.ca.issue(&[], Some(WEB));
    let mut client = client(p.a.addr, &p.ca, Some(&web)).await;
    // The first stream decides: the connection goes to b.
    let (_tx_b, mut to_b) = open(&mut client, of_b, &[]).await.unwrap();
    to_b.message().await.unwrap().expect("b's proxy served");
    // The second, a's, comes back from b as a stream relay.
    let (_tx_a, mut to_a) = open(&mut client, &of_a, &[]).await.unwrap();
    to_a.message().await.unwrap().expect("a's proxy served");
    assert!(p.a.xds.shared.registry.proxy(&of_a).is_some());
    assert!(p.b.xds.shared.registry.proxy(of_b).is_some());
    assert_eq!(p.b.xds.relayed(), 1, "b relays a's stream back");
}

#[tokio::test]
async fn a_tunnel_is_taken_only_from_an_edge() {
    let p = pair_with(XdsConfig::default()).await;
    let mut service = TunnelService::new(p.b.xds.shared.clone());
    let mut req = http::Request::post(crate::ads::transport::relay_header::TUNNEL_PATH)
        .body(tonic::body::Body::empty())
        .unwrap();
    req.extensions_mut().insert(PeerInfo {
        spiffe: Some(SpiffeId::parse(WEB).unwrap()),
        ..Default::default()
    });
    let resp = service.call(req).await.unwrap();
    assert_eq!(
        resp.headers()
            .get("grpc-status")
            .map(|v| v.to_str().unwrap()),
        Some("7"),
        "PERMISSION_DENIED"
    );
    assert_eq!(p.b.xds.connected(), 0);
}

#[tokio::test]
async fn a_live_owner_that_does_not_take_the_tunnel_closes_the_connection_not_served_here() {
    let ca = TestCa::new("mesh");
    let (la, lb, members) = listeners().await;
    let ring = Arc::new(Ring::new(members));
    let (_ring_tx, ring_rx) = watch::channel(ring.clone());
    let config = XdsConfig {
        relay_open_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let a = edge_with(&ca, la, Some(("a", ring_rx)), config);
    silent_edge(&ca, lb);
    let node = node_owned_by(&ring, "b");
    let web = ca.issue(&[], Some(WEB));
    let mut proxy = client(a.addr, &ca, Some(&web)).await;
    let opened = tokio::time::timeout(Duration::from_secs(5), open(&mut proxy, &node, &[]));
    // The proxy reconnects; served here, the next re-home would only move it again.
    opened.await.expect("closed in time").unwrap_err();
    assert_eq!(a.xds.relayed(), 0);
    assert_eq!(a.xds.shared.registry.len(), 0);
}

#[tokio::test]
async fn a_stream_sent_away_closes_its_tunneled_connection() {
    let p = pair_with(XdsConfig::default()).await;
    let node = &p.owned_by_b(1)[0];
    let web = p.ca.issue(&[], Some(WEB));
    let mut proxy = client(p.a.addr, &p.ca, Some(&web)).await;
    let (_tx, mut responses) = open(&mut proxy, node, &[]).await.unwrap();
    responses.message().await.unwrap().expect("served by b");
    // b drains and hands its stream off; the proxy would retry on the connection it has,
    // which would bring it back to b until b exits: the tunnel is closed instead.
    p.b.xds.shared.refusing.store(true, Ordering::Release);
    p.b.xds
        .shared
        .registry
        .proxy(node)
        .unwrap()
        .end(Ending::HandedOff);
    closing_status(&mut responses).await;
    eventually("a forgets the tunnel", || p.a.xds.relayed() == 0).await;
    // Its next connection reaches a, which b (draining) leaves to serve it.
    let (_tx, mut responses) = open(&mut proxy, node, &[]).await.unwrap();
    responses.message().await.unwrap().expect("served by a");
    assert!(p.a.xds.shared.registry.proxy(node).is_some());
}

#[tokio::test]
async fn a_stream_sent_away_leaves_open_a_tunnel_other_streams_use() {
    let p = pair_with(XdsConfig::default()).await;
    let nodes = p.owned_by_b(2);
    let web = p.ca.issue(&[], Some(WEB));
    let mut proxies = client(p.a.addr, &p.ca, Some(&web)).await;
    let (_tx1, mut first) = open(&mut proxies, &nodes[0], &[]).await.unwrap();
    first.message().await.unwrap().expect("served by b");
    let (_tx2, mut second) = open(&mut proxies, &nodes[1], &[]).await.unwrap();
    second.message().await.unwrap().expect("served by b");
    // A load generator's connection carries many proxies: one handed off leaves the
    // others served.
    p.b.xds
        .shared
        .registry
        .proxy(&nodes[0])
        .unwrap()
        .end(Ending::HandedOff);
    closing_status(&mut first).await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(p.a.xds.relayed(), 1, "the tunnel stays");
    assert!(p.b.xds.shared.registry.proxy(&nodes[1]).is_some());
}
