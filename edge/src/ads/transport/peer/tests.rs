//! A connection to an edge over real TLS on loopback, with a bare h2 server in place of
//! the edge's (which answers every stream and can end the connection).

use super::PeerConnection;
use crate::tls::TlsMaterial;
use crate::tls::client::{RelayConnector, relay_config};
use crate::tls::server::server_config;
use crate::tls::tests::{certified, roots};
use bytes::Bytes;
use http::{HeaderMap, Response};
use shoal_proto::security::SpiffeId;
use shoal_test_support::pki::{EDGE_SPIFFE, TestCa};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;

fn material(ca: &TestCa) -> TlsMaterial {
    let leaf = ca.issue(&["127.0.0.1"], Some(EDGE_SPIFFE));
    TlsMaterial {
        cert: watch::channel(certified(&leaf)).1,
        roots: watch::channel(roots(ca)).1,
    }
}

/// Serves `listener` with h2: each stream answered 200, each connection ended once
/// `end` says so (one message per connection accepted).
fn server(material: &TlsMaterial, listener: TcpListener, mut end: mpsc::Receiver<()>) {
    let acceptor = TlsAcceptor::from(server_config(material).unwrap());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let tls = acceptor.accept(tcp).await.unwrap();
            let mut conn = h2::server::handshake(tls).await.unwrap();
            loop {
                tokio::select! {
                    _ = end.recv() => break,
                    accepted = conn.accept() => {
                        let Some(Ok((_, mut respond))) = accepted else { break };
                        respond.send_response(Response::new(()), false).unwrap();
                    }
                }
            }
        }
    });
}

#[tokio::test]
async fn a_connection_that_ended_is_made_again_by_the_next_stream() {
    let ca = TestCa::new("mesh");
    let material = material(&ca);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (end, ends) = mpsc::channel(1);
    server(&material, listener, ends);
    let edge = SpiffeId::parse(EDGE_SPIFFE).unwrap();
    let tls = RelayConnector {
        config: relay_config(&material, edge).unwrap(),
        connect_timeout: Duration::from_secs(2),
    };
    let peer = PeerConnection::new(&addr, tls).unwrap();
    let open = || peer.open("/test/Open", HeaderMap::new(), Bytes::from_static(b"first"));
    let first = open().await.expect("the edge takes the first stream");
    assert!(peer.live().sender.is_some());
    end.send(()).await.unwrap();
    let forgotten = async {
        while peer.live().sender.is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), forgotten)
        .await
        .expect("the ended connection is forgotten");
    drop(first);
    let _second = open().await.expect("the next stream connects again");
    assert!(peer.live().sender.is_some());
}

/// An owner that takes connections but never completes TLS: the streams that waited on
/// one connect fail with it, rather than each trying again (served here, not kept waiting
/// for their turn to time out).
#[tokio::test]
async fn streams_waiting_on_a_connect_that_fails_fail_with_it() {
    let ca = TestCa::new("mesh");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    let tls = RelayConnector {
        config: relay_config(&material(&ca), SpiffeId::parse(EDGE_SPIFFE).unwrap()).unwrap(),
        connect_timeout: Duration::from_millis(300),
    };
    let peer = PeerConnection::new(&addr, tls).unwrap();
    let opens = (0..10).map(|_| peer.open("/test/Open", HeaderMap::new(), Bytes::new()));
    let opened = futures::future::join_all(opens).await;
    assert!(opened.iter().all(|o| o.is_err()));
    assert_eq!(peer.live().attempts, 1, "one connect for the ten streams");
    // The next stream tries again.
    assert!(
        peer.open("/test/Open", HeaderMap::new(), Bytes::new())
            .await
            .is_err()
    );
    assert_eq!(peer.live().attempts, 2);
}

#[test]
fn an_address_without_a_port_is_refused() {
    let ca = TestCa::new("mesh");
    let tls = RelayConnector {
        config: relay_config(&material(&ca), SpiffeId::parse(EDGE_SPIFFE).unwrap()).unwrap(),
        connect_timeout: Duration::from_secs(2),
    };
    let refused = PeerConnection::new("127.0.0.1", tls.clone()).err().unwrap();
    assert!(refused.contains("no port"), "{refused}");
    assert!(PeerConnection::new("not an address:", tls).is_err());
}
