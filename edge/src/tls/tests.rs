//! The secure ADS listener on loopback with real TLS (rustls) and certificates made by a
//! throwaway mesh CA (rcgen), spoken to by a real tonic ADS client.

use super::client::RelayConnector;
use super::incoming::{HandshakeLimits, incoming};
use super::server::server_config;
use super::{TlsMaterial, provider};
use crate::ads::tunnel::Origin;
use crate::ads::{XdsConfig, XdsServer};
use crate::membership::Ring;
use crate::xds::Generator;
use crate::xds::types::CLUSTER;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, RootCertStore};
use shoal_proto::push_context::PushContext;
use shoal_proto::security::authn::ClientCertificate;
use shoal_proto::transport::Member;
use shoal_test_support::pki::{EDGE_SPIFFE, Leaf, TestCa};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status, Streaming};

pub(crate) const WEB: &str = "spiffe://cluster.local/ns/a/sa/web";

pub(crate) fn certified(leaf: &Leaf) -> Arc<CertifiedKey> {
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key_der.clone()));
    let signer = provider().key_provider.load_private_key(key).unwrap();
    Arc::new(CertifiedKey::new(
        vec![CertificateDer::from(leaf.cert_der.clone())],
        signer,
    ))
}

pub(crate) fn roots(ca: &TestCa) -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from(ca.root_der.clone()))
        .unwrap();
    Arc::new(roots)
}

/// An edge serving secure ADS on loopback.
pub(crate) struct TestEdge {
    pub xds: XdsServer,
    pub addr: SocketAddr,
    cert: watch::Sender<Arc<CertifiedKey>>,
    _snapshots: watch::Sender<Arc<PushContext>>,
}

async fn edge(ca: &TestCa, ring: Option<(&str, watch::Receiver<Arc<Ring>>)>) -> TestEdge {
    edge_on(ca, TcpListener::bind("127.0.0.1:0").await.unwrap(), ring)
}

fn edge_on(
    ca: &TestCa,
    listener: TcpListener,
    ring: Option<(&str, watch::Receiver<Arc<Ring>>)>,
) -> TestEdge {
    edge_with(ca, listener, ring, XdsConfig::default())
}

/// An edge on `listener` with `config`; owning by `ring` and relaying when given one.
pub(crate) fn edge_with(
    ca: &TestCa,
    listener: TcpListener,
    ring: Option<(&str, watch::Receiver<Arc<Ring>>)>,
    config: XdsConfig,
) -> TestEdge {
    let leaf = ca.issue(&["127.0.0.1"], Some(EDGE_SPIFFE));
    let (cert, cert_rx) = watch::channel(certified(&leaf));
    let material = TlsMaterial {
        cert: cert_rx,
        roots: watch::channel(roots(ca)).1,
    };
    let (snapshots, rx) = watch::channel(Arc::new(PushContext::empty()));
    let mut registry = prometheus_client::registry::Registry::default();
    let xds = XdsServer::new(config, Arc::new(Generator::new()), rx, &mut registry);
    if let Some((me, ring)) = ring {
        xds.own_by_ring(me, ring);
        xds.relay_over_tls(&material).unwrap();
    }
    let addr = listener.local_addr().unwrap();
    let config = server_config(&material).unwrap();
    let limits = HandshakeLimits {
        timeout: Duration::from_secs(2),
        concurrent: 16,
    };
    let service = xds.secure_ads_service(Arc::new(ClientCertificate::new(
        "cluster.local",
        Vec::new(),
    )));
    // As `run` serves the secure listener: connections routed (served or tunneled) and
    // tunnels taken from other edges.
    let conns = xds.incoming(Origin::Secure, incoming(listener, config, limits));
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .add_service(xds.tunnel_service())
            .serve_with_incoming(conns),
    );
    TestEdge {
        xds,
        addr,
        cert,
        _snapshots: snapshots,
    }
}

/// An edge that completes the TLS handshake on `listener` and then never answers: alive
/// to its peers, but taking no stream.
pub(crate) fn silent_edge(ca: &TestCa, listener: TcpListener) {
    let leaf = ca.issue(&["127.0.0.1"], Some(EDGE_SPIFFE));
    let material = TlsMaterial {
        cert: watch::channel(certified(&leaf)).1,
        roots: watch::channel(roots(ca)).1,
    };
    let config = server_config(&material).unwrap();
    let limits = HandshakeLimits {
        timeout: Duration::from_secs(2),
        concurrent: 16,
    };
    tokio::spawn(async move {
        let _material = material;
        let mut held = Vec::new();
        let mut accepted = incoming(listener, config, limits);
        while let Some(conn) = tokio_stream::StreamExt::next(&mut accepted).await {
            held.push(conn);
        }
    });
}

/// The node ID of a proxy of namespace `a` that `member` owns under `ring`.
pub(crate) fn node_owned_by(ring: &Ring, member: &str) -> String {
    (0..1000)
        .map(|i| format!("sidecar~10.0.0.{i}~web-{i}.a~a.svc.cluster.local"))
        .find(|id| ring.owner(id).is_some_and(|m| m.id == member))
        .expect("a proxy the member owns")
}

/// A client trusting the mesh root, presenting `leaf` when given.
fn client_config(ca: &TestCa, leaf: Option<&Leaf>) -> Arc<ClientConfig> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots(ca));
    let mut config = match leaf {
        Some(leaf) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from(leaf.cert_der.clone())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key_der.clone())),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Arc::new(config)
}

pub(crate) async fn client(
    addr: SocketAddr,
    ca: &TestCa,
    leaf: Option<&Leaf>,
) -> AggregatedDiscoveryServiceClient<Channel> {
    let connector = RelayConnector {
        config: client_config(ca, leaf),
        connect_timeout: Duration::from_secs(2),
    };
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_with_connector(connector)
        .await
        .unwrap();
    AggregatedDiscoveryServiceClient::new(channel)
}

fn first(node: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        node: Some(Node {
            id: node.into(),
            ..Default::default()
        }),
        type_url: CLUSTER.into(),
        ..Default::default()
    }
}

/// Opens a SotW stream whose first request names `node`; the sender keeps it open.
pub(crate) async fn open(
    client: &mut AggregatedDiscoveryServiceClient<Channel>,
    node: &str,
    headers: &[(&'static str, &'static str)],
) -> Result<(mpsc::Sender<DiscoveryRequest>, Streaming<DiscoveryResponse>), Status> {
    let (tx, rx) = mpsc::channel(4);
    tx.send(first(node)).await.unwrap();
    let mut req = tonic::Request::new(ReceiverStream::new(rx));
    for (k, v) in headers {
        req.metadata_mut().insert(*k, v.parse().unwrap());
    }
    let resp = client.stream_aggregated_resources(req).await?;
    Ok((tx, resp.into_inner()))
}

const NODE_A: &str = "sidecar~10.0.0.1~web-1.a~a.svc.cluster.local";

#[tokio::test]
async fn a_workload_certificate_gets_an_authenticated_stream() {
    let ca = TestCa::new("mesh");
    let edge = edge(&ca, None).await;
    let web = ca.issue(&[], Some(WEB));
    let mut client = client(edge.addr, &ca, Some(&web)).await;
    let (_tx, mut responses) = open(&mut client, NODE_A, &[]).await.unwrap();
    responses.message().await.unwrap().expect("a CDS response");
    let conn = edge.xds.shared.registry.proxy(NODE_A).expect("registered");
    assert_eq!(
        conn.proxy.identity.to_string(),
        format!("{WEB} (client-certificate)")
    );
}

#[tokio::test]
async fn no_credentials_on_the_secure_port_is_unauthenticated() {
    let ca = TestCa::new("mesh");
    let edge = edge(&ca, None).await;
    let mut client = client(edge.addr, &ca, None).await;
    let status = open(&mut client, NODE_A, &[]).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status}");
    assert!(
        status.message().contains("no client certificate"),
        "{status}"
    );
}

#[tokio::test]
async fn a_node_spoofing_another_namespace_is_permission_denied_naming_both() {
    let ca = TestCa::new("mesh");
    let edge = edge(&ca, None).await;
    let web = ca.issue(&[], Some(WEB));
    let mut client = client(edge.addr, &ca, Some(&web)).await;
    let spoofed = "router~10.0.0.1~gw-1.gateways~gateways.svc.cluster.local";
    let status = open(&mut client, spoofed, &[]).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status}");
    assert!(
        status.message().contains(r#"namespace "gateways""#),
        "{status}"
    );
    assert!(status.message().contains(WEB), "{status}");
    assert!(edge.xds.proxy_ids().is_empty());
}

#[tokio::test]
async fn a_workload_setting_the_relay_header_over_tls_is_permission_denied() {
    let ca = TestCa::new("mesh");
    let edge = edge(&ca, None).await;
    let web = ca.issue(&[], Some(WEB));
    let mut client = client(edge.addr, &ca, Some(&web)).await;
    for header in [
        ("x-shoal-relayed-by", "edge-0"),
        (
            "x-shoal-relayed-identity",
            "spiffe://cluster.local/ns/gateways/sa/gw;jwt",
        ),
    ] {
        let status = open(&mut client, NODE_A, &[header]).await.unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{status}");
        assert!(status.message().contains(WEB), "{status}");
    }
    assert!(edge.xds.proxy_ids().is_empty());
}

#[tokio::test]
async fn a_relay_between_two_edges_over_mtls_keeps_the_proxys_identity() {
    let ca = TestCa::new("mesh");
    let (la, lb) = (
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
    );
    let ring = Arc::new(Ring::new(vec![
        Member {
            id: "a".into(),
            xds_addr: la.local_addr().unwrap().to_string(),
        },
        Member {
            id: "b".into(),
            xds_addr: lb.local_addr().unwrap().to_string(),
        },
    ]));
    let node = node_owned_by(&ring, "b");
    let (_ring_tx, ring_rx) = watch::channel(ring);
    let a = edge_on(&ca, la, Some(("a", ring_rx.clone())));
    let b = edge_on(&ca, lb, Some(("b", ring_rx)));
    let web = ca.issue(&[], Some(WEB));
    let mut client = client(a.addr, &ca, Some(&web)).await;
    let (_tx, mut responses) = open(&mut client, &node, &[]).await.unwrap();
    responses
        .message()
        .await
        .unwrap()
        .expect("a CDS response, relayed");
    assert_eq!(a.xds.relayed(), 1, "a relays the stream");
    assert!(a.xds.proxy_ids().is_empty());
    let conn = b
        .xds
        .shared
        .registry
        .proxy(&node)
        .expect("served by its owner");
    assert_eq!(
        conn.proxy.identity.to_string(),
        format!("{WEB} (client-certificate)"),
        "the owner serves the identity a authenticated, not a's"
    );
}

/// The leaf certificate a server presents to a new connection.
async fn served_leaf(addr: SocketAddr, ca: &TestCa) -> Vec<u8> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let tls = tokio_rustls::TlsConnector::from(client_config(ca, None))
        .connect(name, tcp)
        .await
        .unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

#[tokio::test]
async fn a_certificate_swapped_through_the_watch_is_served_to_the_next_connection() {
    let ca = TestCa::new("mesh");
    let edge = edge(&ca, None).await;
    let before = served_leaf(edge.addr, &ca).await;
    let renewed = ca.issue(&["127.0.0.1"], Some(EDGE_SPIFFE));
    edge.cert.send_replace(certified(&renewed));
    let after = served_leaf(edge.addr, &ca).await;
    assert_ne!(before, after);
    assert_eq!(after, renewed.cert_der);
}

#[tokio::test]
async fn a_stalled_handshake_does_not_hold_up_the_next_client() {
    let ca = TestCa::new("mesh");
    let edge = edge(&ca, None).await;
    // Connected, never says hello.
    let _stalled = TcpStream::connect(edge.addr).await.unwrap();
    let web = ca.issue(&[], Some(WEB));
    let served = async {
        let mut client = client(edge.addr, &ca, Some(&web)).await;
        let (_tx, mut responses) = open(&mut client, NODE_A, &[]).await.unwrap();
        responses.message().await.unwrap().expect("a CDS response");
    };
    tokio::time::timeout(Duration::from_secs(1), served)
        .await
        .expect("served while another handshake stalls");
}

#[tokio::test]
async fn certificate_files_are_re_read_when_they_change_and_a_bad_change_keeps_the_old() {
    use super::files::CertFiles;
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("mesh");
    let first_leaf = ca.issue(&["127.0.0.1"], Some(EDGE_SPIFFE));
    let (cert, key, root) = ca.write(dir.path(), "edge", &first_leaf);
    let files = CertFiles {
        cert: cert.clone(),
        key: key.clone(),
        ca: Some(root),
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (material, reload) = files
        .watch(Duration::from_millis(20), async {
            let _ = stop_rx.await;
        })
        .unwrap();
    let task = tokio::spawn(reload);
    let served = |m: &TlsMaterial| m.cert.borrow().cert[0].to_vec();
    assert_eq!(served(&material), first_leaf.cert_der);
    assert_eq!(material.roots.borrow().len(), 1);

    // A key that does not match the new certificate: reported, the old one kept.
    let renewed = ca.issue(&["127.0.0.1"], Some(EDGE_SPIFFE));
    std::fs::write(&cert, &renewed.cert_pem).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(served(&material), first_leaf.cert_der);

    // Its key arrives: served from then on.
    std::fs::write(&key, &renewed.key_pem).unwrap();
    let mut cert_rx = material.cert.clone();
    tokio::time::timeout(
        Duration::from_secs(5),
        cert_rx.wait_for(|c| c.cert[0].as_ref() == renewed.cert_der.as_slice()),
    )
    .await
    .expect("reloaded")
    .unwrap();
    drop(stop_tx);
    task.await.unwrap();
}

#[test]
fn unusable_files_are_refused_naming_the_file() {
    use super::files::CertFiles;
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("mesh");
    let leaf = ca.issue(&["127.0.0.1"], None);
    let (cert, key, _) = ca.write(dir.path(), "edge", &leaf);
    let other = ca.issue(&["127.0.0.1"], None);
    std::fs::write(&key, &other.key_pem).unwrap();
    let files = CertFiles {
        cert: cert.clone(),
        key: key.clone(),
        ca: None,
    };
    let err = files.load().unwrap_err().to_string();
    assert!(err.contains(&key.display().to_string()), "{err}");
    assert!(err.contains("does not match"), "{err}");
    assert!(!err.contains("PRIVATE KEY"), "no key material: {err}");
    let missing = CertFiles {
        cert: dir.path().join("nope.pem"),
        key,
        ca: None,
    };
    let err = missing.load().unwrap_err().to_string();
    assert!(err.contains("nope.pem"), "{err}");
}
