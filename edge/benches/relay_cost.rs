//! What a relayed stream costs the edge that relays it, against what a served stream
//! costs the edge that serves it: resident memory and CPU per stream, each edge a process
//! of its own, the proxies (this process) one stream to a connection as Envoy and the
//! agent open them (`SHOAL_RELAY_STREAMS_PER_CONN`: more, as the loadtest can). The
//! edges relay whole connections (`SHOAL_RELAY_CONNECTIONS=false`: each stream). The
//! proxies reach the plaintext listener, or with `SHOAL_RELAY_PROXY_TLS=true` the secure
//! one over mTLS with a workload certificate of their namespace, as Envoy and the agent
//! reach istiod's 15012.
//!
//! ```text
//!  served:  proxies ──plaintext or mTLS──► edge b (serves)                       measured: b
//!  relayed: proxies ──plaintext or mTLS──► edge a ──mTLS relay──► edge b (owner) measured: a
//! ```
//!
//! Each stream syncs CDS, EDS, LDS and RDS (requested and ACKed) and holds; the figures
//! are the measured edge's RSS and CPU (`/proc/<pid>/statm`, `/proc/<pid>/stat`) added
//! from before the streams open to once every one is synced, divided by the streams.
//!
//! ```sh
//! cargo bench -p shoal-edge --bench relay_cost          # Linux; SHOAL_RELAY_STREAMS=5000
//! ```
//!
//! The mesh is that of `xds.rs`: 1k services × 10 endpoints in 10 namespaces, each with a
//! Sidecar narrowing egress to its namespace.

mod support;

// The allocator the edge binary runs with.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;
use shoal_edge::ads::tunnel::{Origin, plain_conns};
use shoal_edge::ads::{XdsConfig, XdsServer};
use shoal_edge::membership::Ring;
use shoal_edge::proxy::Proxy;
use shoal_edge::tls::TlsMaterial;
use shoal_edge::tls::client::RelayConnector;
use shoal_edge::tls::incoming::{HandshakeLimits, incoming};
use shoal_edge::xds::Generator;
use shoal_edge::xds::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE, is_wildcard};
use shoal_proto::security::authn::ClientCertificate;
use shoal_proto::transport::Member;
use shoal_proto::xds::node_metadata::{LABELS, NAMESPACE};
use shoal_test_support::pki::{EDGE_SPIFFE, TestCa};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};

const TYPES: [&str; 4] = [CLUSTER, ENDPOINT, LISTENER, ROUTE];
/// How long a stream waits for each response before the run fails, naming it.
const SYNC_WAIT: Duration = Duration::from_secs(60);
/// Streams per HTTP/2 connection: one, as Envoy and the agent open them.
const STREAMS_PER_CONN_ENV: &str = "SHOAL_RELAY_STREAMS_PER_CONN";
/// Proxies over mTLS to the secure listener, not plaintext.
const PROXY_TLS_ENV: &str = "SHOAL_RELAY_PROXY_TLS";
const ROLE_ENV: &str = "SHOAL_RELAY_COST_ROLE";
const DIR_ENV: &str = "SHOAL_RELAY_COST_DIR";

fn main() {
    // `cargo bench` passes `--bench`; a filter that is not ours skips the run.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"relay_cost".contains(a.as_str()))
    {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    match std::env::var(ROLE_ENV) {
        Ok(me) => rt.block_on(edge(&me)),
        Err(_) => rt.block_on(proxies()),
    }
}

/// One edge: prints its plaintext and secure addresses, reads the ring (`a=<addr>
/// b=<addr>`, or `alone`) from stdin, serves until stdin closes.
async fn edge(me: &str) {
    let dir = std::path::PathBuf::from(std::env::var(DIR_ENV).unwrap());
    let (_mesh, push) = support::push_context(&support::spec(1_000, true));
    let (_snapshots, rx) = watch::channel(Arc::new(push));
    let mut registry = prometheus_client::registry::Registry::default();
    let config = XdsConfig {
        relay_connections: std::env::var("SHOAL_RELAY_CONNECTIONS").as_deref() != Ok("false"),
        ..XdsConfig::default()
    };
    let xds = XdsServer::new(config, Arc::new(Generator::new()), rx, &mut registry);
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(read(&dir, "edge.key")));
    let provider = rustls::crypto::ring::default_provider();
    let signer = provider.key_provider.load_private_key(key).unwrap();
    let cert = CertifiedKey::new(vec![CertificateDer::from(read(&dir, "edge.crt"))], signer);
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(read(&dir, "root.crt")))
        .unwrap();
    let material = TlsMaterial {
        cert: watch::channel(Arc::new(cert)).1,
        roots: watch::channel(Arc::new(roots)).1,
    };
    let plain = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let secure = TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!(
        "{} {}",
        plain.local_addr().unwrap(),
        secure.local_addr().unwrap()
    );
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    let (ring_tx, ring_rx) = watch::channel(Arc::new(Ring::default()));
    if line.trim() != "alone" {
        let members = line
            .split_whitespace()
            .map(|m| {
                let (id, addr) = m.split_once('=').unwrap();
                Member {
                    id: id.into(),
                    xds_addr: addr.into(),
                }
            })
            .collect();
        ring_tx.send_replace(Arc::new(Ring::new(members)));
        xds.own_by_ring(me, ring_rx);
        xds.relay_over_tls(&material).unwrap();
    }
    let tls = shoal_edge::tls::server::server_config(&material).unwrap();
    let limits = HandshakeLimits {
        timeout: Duration::from_secs(5),
        concurrent: 64,
    };
    let secure_service = xds.secure_ads_service(Arc::new(ClientCertificate::new(
        "cluster.local",
        Vec::new(),
    )));
    // As the edge binary serves them: connections routed (served or tunneled).
    let secure_conns = xds.incoming(Origin::Secure, incoming(secure, tls, limits));
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(secure_service)
            .add_service(xds.tunnel_service())
            .serve_with_incoming(secure_conns),
    );
    let plain_conns = xds.incoming(Origin::Plaintext, plain_conns(plain));
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(xds.ads_service())
            .serve_with_incoming(plain_conns),
    );
    // Until the parent closes stdin.
    tokio::task::spawn_blocking(|| {
        let mut rest = String::new();
        while std::io::stdin().lock().read_line(&mut rest).unwrap_or(0) > 0 {}
    })
    .await
    .unwrap();
}

fn read(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap()
}

/// A stream: what keeps its requests open and its responses read.
type Held = (
    mpsc::Sender<DiscoveryRequest>,
    tonic::Streaming<DiscoveryResponse>,
);

/// An edge process, its addresses, and a pipe to it.
struct EdgeProc {
    child: Child,
    plain: String,
    secure: String,
}

impl EdgeProc {
    fn spawn(me: &str, dir: &Path) -> EdgeProc {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env(ROLE_ENV, me)
            .env(DIR_ENV, dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let (plain, secure) = line.trim().split_once(' ').unwrap();
        EdgeProc {
            plain: plain.into(),
            secure: secure.into(),
            child,
        }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.child.stdin.as_mut().unwrap(), "{line}").unwrap();
    }

    /// Resident bytes and CPU seconds (user + system) of the process.
    fn usage(&self) -> (f64, f64) {
        let pid = self.child.id();
        let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap();
        let pages: f64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        // Fields after the `(comm)`: utime and stime are the 12th and 13th.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<f64> = after
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0.0))
            .collect();
        // Clock ticks: 100 per second on Linux.
        (pages * 4096.0, (f[11] + f[12]) / 100.0)
    }
}

impl Drop for EdgeProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn proxies() {
    let n: usize = std::env::var("SHOAL_RELAY_STREAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000);
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("mesh");
    let leaf = ca.issue(&["127.0.0.1"], Some(EDGE_SPIFFE));
    std::fs::write(dir.path().join("root.crt"), &ca.root_der).unwrap();
    std::fs::write(dir.path().join("edge.crt"), &leaf.cert_der).unwrap();
    std::fs::write(dir.path().join("edge.key"), &leaf.key_der).unwrap();
    let (mesh, push) = support::push_context(&support::spec(1_000, true));
    let proxy_tls = (std::env::var(PROXY_TLS_ENV).as_deref() == Ok("true")).then(|| {
        let namespaces: Vec<String> = (0..mesh.spec.namespaces)
            .map(|i| format!("ns-{i}"))
            .collect();
        workload_connectors(&ca, &namespaces)
    });
    let generator = Generator::new();
    let mut names: HashMap<String, Vec<Vec<String>>> = HashMap::new();
    for mode in ["served", "relayed"] {
        let mut b = EdgeProc::spawn("b", dir.path());
        let mut a = (mode == "relayed").then(|| EdgeProc::spawn("a", dir.path()));
        match a.as_mut() {
            Some(a) => {
                let ring = format!("a={} b={}", a.secure, b.secure);
                a.send(&ring);
                b.send(&ring);
            }
            None => b.send("alone"),
        }
        // Proxies b owns under the ring of a and b.
        let ring = Ring::new(vec![
            Member {
                id: "a".into(),
                xds_addr: String::new(),
            },
            Member {
                id: "b".into(),
                xds_addr: String::new(),
            },
        ]);
        let fleet: Vec<Proxy> = (0..)
            .map(|i| support::proxy(&mesh, i))
            .filter(|p| ring.owner(&p.id).is_some_and(|m| m.id == "b"))
            .take(n + mesh.spec.namespaces)
            .collect();
        for p in &fleet {
            names.entry(p.namespace.clone()).or_insert_with(|| {
                TYPES
                    .iter()
                    .map(|t| {
                        if is_wildcard(t) {
                            return Vec::new();
                        }
                        let all = generator.generate(t, p, &push, &[]).expect("generates");
                        all.iter().map(|r| r.name.clone()).collect()
                    })
                    .collect()
            });
        }
        // The edge the proxies reach is the one measured.
        let measured = a.as_ref().unwrap_or(&b);
        let target = match proxy_tls {
            Some(_) => measured.secure.clone(),
            None => measured.plain.clone(),
        };
        // Warm: one stream per namespace (every scope generated once), then closed.
        let (warm, rest) = fleet.split_at(mesh.spec.namespaces);
        drop(open_all(&target, proxy_tls.as_ref(), warm, &names).await);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (rss0, cpu0) = measured.usage();
        let b0 = b.usage();
        let started = Instant::now();
        let held = open_all(&target, proxy_tls.as_ref(), rest, &names).await;
        let synced = started.elapsed();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (rss1, cpu1) = measured.usage();
        let b1 = b.usage();
        let per = |x: f64| x / rest.len() as f64;
        println!(
            "{mode}: {} streams synced in {:.1?}; the {} edge added {:.2} KiB resident and \
             {:.3} CPU-ms per stream",
            rest.len(),
            synced,
            if a.is_some() { "relaying" } else { "serving" },
            per(rss1 - rss0) / 1024.0,
            per(cpu1 - cpu0) * 1000.0,
        );
        if a.is_some() {
            println!(
                "    (the owner b behind it: {:.2} KiB, {:.3} CPU-ms per stream)",
                per(b1.0 - b0.0) / 1024.0,
                per(b1.1 - b0.1) * 1000.0
            );
        }
        drop(held);
    }
}

/// Per namespace, a connector presenting a workload certificate of it.
fn workload_connectors(ca: &TestCa, namespaces: &[String]) -> HashMap<String, RelayConnector> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(ca.root_der.clone()))
        .unwrap();
    let roots = Arc::new(roots);
    namespaces
        .iter()
        .map(|ns| {
            let spiffe = format!("spiffe://cluster.local/ns/{ns}/sa/default");
            let leaf = ca.issue(&[], Some(&spiffe));
            let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots.clone())
                .with_client_auth_cert(
                    vec![CertificateDer::from(leaf.cert_der)],
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key_der)),
                )
                .unwrap();
            config.alpn_protocols = vec![b"h2".to_vec()];
            let connector = RelayConnector {
                config: Arc::new(config),
                connect_timeout: Duration::from_secs(10),
            };
            (ns.clone(), connector)
        })
        .collect()
}

/// The streams of `fleet` to `addr` (over mTLS with `tls`, by namespace), each through
/// its initial sync, held open.
async fn open_all(
    addr: &str,
    tls: Option<&HashMap<String, RelayConnector>>,
    fleet: &[Proxy],
    names: &HashMap<String, Vec<Vec<String>>>,
) -> Vec<Held> {
    let per_conn: usize = std::env::var(STREAMS_PER_CONN_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    // A connection's certificate names one namespace, that of its proxies' nodes.
    assert!(
        tls.is_none() || per_conn <= 1,
        "over mTLS, one stream per connection"
    );
    let mut syncs = Vec::new();
    for chunk in fleet.chunks(per_conn.max(1)) {
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .initial_stream_window_size(1 << 20);
        let channel = match tls {
            Some(tls) => {
                let connector = tls[&chunk[0].namespace].clone();
                endpoint.connect_with_connector(connector).await
            }
            None => endpoint.connect().await,
        }
        .unwrap();
        for p in chunk {
            let subs = names[&p.namespace].clone();
            syncs.push(tokio::spawn(sync(channel.clone(), node(p), subs)));
        }
    }
    let mut held = Vec::new();
    for s in syncs {
        held.push(s.await.unwrap());
    }
    held
}

/// Requests and ACKs each type on a new stream.
async fn sync(channel: Channel, node: Node, subs: Vec<Vec<String>>) -> Held {
    let mut client = AggregatedDiscoveryServiceClient::new(channel);
    let (tx, rx) = mpsc::channel(4);
    let request = |type_url: &str, names: &[String]| DiscoveryRequest {
        type_url: type_url.to_string(),
        resource_names: names.to_vec(),
        ..Default::default()
    };
    let mut first = request(TYPES[0], &subs[0]);
    let node_id = node.id.clone();
    first.node = Some(node);
    tx.send(first).await.unwrap();
    let mut responses = client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await
        .expect("stream accepted")
        .into_inner();
    for (i, (&type_url, names)) in TYPES.iter().zip(&subs).enumerate() {
        if i > 0 {
            tx.send(request(type_url, names.as_slice())).await.unwrap();
        }
        // A stream never answered is named, not waited for forever.
        let resp = tokio::time::timeout(SYNC_WAIT, responses.message())
            .await
            .unwrap_or_else(|_| panic!("{node_id}: no {type_url} response in {SYNC_WAIT:?}"))
            .unwrap()
            .expect("a response");
        let mut ack = request(type_url, names.as_slice());
        ack.version_info = resp.version_info;
        ack.response_nonce = resp.nonce;
        tx.send(ack).await.unwrap();
    }
    (tx, responses)
}

fn node(p: &Proxy) -> Node {
    let string = |s: &str| Value {
        kind: Some(Kind::StringValue(s.to_string())),
    };
    let labels = Struct {
        fields: p
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), string(v)))
            .collect(),
    };
    Node {
        id: p.id.clone(),
        metadata: Some(Struct {
            fields: [
                (NAMESPACE.to_string(), string(&p.namespace)),
                (
                    LABELS.to_string(),
                    Value {
                        kind: Some(Kind::StructValue(labels)),
                    },
                ),
            ]
            .into_iter()
            .collect(),
        }),
        ..Default::default()
    }
}
