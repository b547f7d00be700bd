//! The ADS server driving a real Envoy, over SotW and over Delta: Envoy subscribes CDS →
//! EDS → LDS → RDS on its own, ACKs everything, and routes real traffic to local backends;
//! an endpoint push moves the traffic, a cluster change re-warms without getting stuck.
//! Over Delta, an Envoy that reconnects holding every current version is sent nothing and
//! keeps serving.
//!
//! Skipped, with a notice, where no Envoy binary is installed (`SHOAL_ENVOY` or
//! `.venv/bin/envoy`).

mod ads_support;

use ads_support::*;
use shoal_infra::testing::free_port;
use shoal_proto::config::{ConfigKey, Kind, istio};
use shoal_proto::model::{Endpoint, NamedConfig, NamespaceConfig, ServiceEndpoints};
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::Chunk;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const CONVERGE: Duration = Duration::from_secs(20);
const WARM: Duration = Duration::from_secs(5);

fn envoy_binary() -> Option<PathBuf> {
    let configured = std::env::var_os("SHOAL_ENVOY").map(PathBuf::from);
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/envoy");
    configured.into_iter().chain([venv]).find(|p| p.is_file())
}

/// An HTTP backend answering every request with `body`.
async fn backend(body: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(resp.as_bytes()).await;
            });
        }
    });
    port
}

/// `GET /` with `host`; the status code and body, or `None` when nothing answers.
async fn get(addr: SocketAddr, host: &str, path: &str) -> Option<(u16, String)> {
    let mut conn = TcpStream::connect(addr).await.ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n");
    conn.write_all(req.as_bytes()).await.ok()?;
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(2), conn.read_to_end(&mut out))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&out).to_string();
    let code = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n")?.1.to_string();
    Some((code, body))
}

async fn eventually<F: AsyncFnMut() -> bool>(what: &str, check: F) {
    within(CONVERGE, what, check).await
}

async fn within<F: AsyncFnMut() -> bool>(limit: Duration, what: &str, mut check: F) {
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct Envoy {
    child: tokio::process::Child,
    admin: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Envoy {
    async fn start(bin: &PathBuf, xds: SocketAddr, api_type: &str) -> Envoy {
        let dir = tempfile::tempdir().unwrap();
        let bootstrap = format!(
            r#"
node:
  id: "sidecar~127.0.0.1~web-1.shop~shop.svc.cluster.local"
  cluster: web.shop
  metadata: {{ NAMESPACE: shop, INTERCEPTION_MODE: NONE }}
admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
dynamic_resources:
  ads_config:
    api_type: {api_type}
    transport_api_version: V3
    grpc_services: [{{ envoy_grpc: {{ cluster_name: xds }} }}]
  cds_config: {{ ads: {{}}, resource_api_version: V3 }}
  lds_config: {{ ads: {{}}, resource_api_version: V3 }}
static_resources:
  clusters:
  - name: xds
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{ http2_protocol_options: {{}} }}
    load_assignment:
      cluster_name: xds
      endpoints:
      - lb_endpoints:
        - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {} }} }} }}
"#,
            xds.port()
        );
        let config = dir.path().join("bootstrap.yaml");
        std::fs::write(&config, bootstrap).unwrap();
        let admin_path = dir.path().join("admin");
        let log = std::fs::File::create(dir.path().join("envoy.log")).unwrap();
        let child = tokio::process::Command::new(bin)
            .arg("-c")
            .arg(&config)
            .arg("--admin-address-path")
            .arg(&admin_path)
            .args(["--disable-hot-restart", "--concurrency", "1"])
            .args(["--log-level", "warning"])
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut admin = None;
        let deadline = Instant::now() + CONVERGE;
        while admin.is_none() {
            assert!(Instant::now() < deadline, "envoy did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
            admin = std::fs::read_to_string(&admin_path)
                .ok()
                .and_then(|s| s.trim().parse().ok());
        }
        Envoy {
            child,
            admin: admin.unwrap(),
            _dir: dir,
        }
    }

    async fn stat(&self, name: &str) -> Option<u64> {
        let (_, body) = get(self.admin, "admin", &format!("/stats?filter=^{name}$")).await?;
        body.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .and_then(|v| v.trim().parse().ok())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("envoy.log")).unwrap_or_default()
    }
}

fn endpoint_chunk(svc_port: u32, backend_port: u16) -> Chunk {
    let svc = service("reviews", svc_port);
    Chunk::Endpoints(ServiceEndpoints {
        service: svc.key(),
        endpoints: vec![Endpoint {
            address: "127.0.0.1".into(),
            port: backend_port.into(),
            service_port: svc_port,
            labels: Default::default(),
            cluster: "c1".into(),
            network: String::new(),
            locality: String::new(),
            weight: 1,
            healthy: true,
            service_account: "default".into(),
        }],
    })
}

fn types_synced(syncz: &serde_json::Value, version: &str) -> bool {
    let Some(types) = syncz[0]["types"].as_object() else {
        return false;
    };
    types.len() == 4
        && types.values().all(|t| t["state"] == "SYNCED")
        && types["cds"]["version_acked"] == version
}

async fn drives_real_envoy(api_type: &str) {
    let Some(bin) = envoy_binary() else {
        eprintln!("notice: no Envoy binary (SHOAL_ENVOY or .venv/bin/envoy); skipping");
        return;
    };
    let (b1, b2) = (backend("b1").await, backend("b2").await);
    let port = u32::from(free_port());
    let host = format!("reviews.shop.svc.cluster.local:{port}");
    let listener: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let v1 = PushContext::from_chunks(
        1,
        [
            endpoint_chunk(port, b1),
            namespace(vec![service("reviews", port)]),
        ],
    );
    let h = Harness::start(v1).await;
    let envoy = Envoy::start(&bin, h.addr, api_type).await;

    // Envoy walks CDS → EDS → LDS → RDS by itself and ACKs each; traffic reaches b1.
    eventually("traffic to b1", async || {
        get(listener, &host, "/").await == Some((200, "b1".into()))
    })
    .await;
    eventually("every type synced", async || {
        types_synced(&h.server.syncz(), "1")
    })
    .await;
    let syncz = h.server.syncz();
    assert_eq!(
        syncz[0]["protocol"],
        if api_type == "GRPC" { "sotw" } else { "delta" }
    );

    // An endpoint-only push moves the traffic to b2.
    let v2 = h.latest().with_changes(2, [endpoint_chunk(port, b2)], []);
    h.update(v2, false, &[service_key(REVIEWS)]).await;
    eventually("traffic to b2", async || {
        get(listener, &host, "/").await == Some((200, "b2".into()))
    })
    .await;

    // A DestinationRule changes the cluster: Envoy re-warms it, gets its endpoints again
    // and keeps serving; nothing stays warming, nothing is rejected.
    let mut ns = NamespaceConfig {
        namespace: NS.into(),
        services: vec![service("reviews", port)],
        ..Default::default()
    };
    ns.destination_rules.push(NamedConfig {
        name: "reviews".into(),
        namespace: NS.into(),
        created: 0,
        spec: istio::DestinationRule {
            host: REVIEWS.into(),
            traffic_policy: Some(istio::TrafficPolicy {
                load_balancer: Some(istio::LoadBalancerSettings {
                    simple: Some("RANDOM".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
    });
    let v3 = h.latest().with_changes(3, [Chunk::Namespace(ns)], []);
    let dr = ConfigKey::new(Kind::DestinationRule, NS, "reviews");
    h.update(v3, true, &[dr.into()]).await;
    // Well under Envoy's 15 s initial_fetch_timeout: the re-warming cluster got its
    // endpoints (they are resent when their cluster changes) instead of timing out.
    within(WARM, "cluster change acknowledged and warmed", async || {
        types_synced(&h.server.syncz(), "3")
            && envoy.stat("cluster_manager.warming_clusters").await == Some(0)
    })
    .await;
    assert_eq!(get(listener, &host, "/").await, Some((200, "b2".into())));
    for stat in [
        "cluster_manager.cds.update_rejected",
        "listener_manager.lds.update_rejected",
    ] {
        assert_eq!(envoy.stat(stat).await, Some(0), "{stat}\n{}", envoy.log());
    }
    assert_eq!(envoy.stat("control_plane.connected_state").await, Some(1));
    // No NACK of any type: every rejection counter (present from the start) is 0.
    let metrics = h.metrics();
    let rejects: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("pilot_total_xds_rejects_total{"))
        .collect();
    assert!(!rejects.is_empty(), "{metrics}");
    assert!(rejects.iter().all(|l| l.ends_with(" 0")), "{rejects:?}");

    drop(envoy.child);
    h.shutdown().await;
}

#[tokio::test]
async fn sotw_drives_real_envoy() {
    drives_real_envoy("GRPC").await;
}

#[tokio::test]
async fn delta_drives_real_envoy() {
    drives_real_envoy("DELTA_GRPC").await;
}

/// A Delta Envoy whose edge goes away reconnects to another one serving the same config:
/// it names every version it holds, is sent nothing, keeps serving and takes the next push.
#[tokio::test]
async fn delta_reconnect_holding_every_current_version_is_sent_nothing() {
    let Some(bin) = envoy_binary() else {
        eprintln!("notice: no Envoy binary (SHOAL_ENVOY or .venv/bin/envoy); skipping");
        return;
    };
    let (b1, b2) = (backend("b1").await, backend("b2").await);
    let port = u32::from(free_port());
    let host = format!("reviews.shop.svc.cluster.local:{port}");
    let listener: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let v1 = || {
        PushContext::from_chunks(
            1,
            [
                endpoint_chunk(port, b1),
                namespace(vec![service("reviews", port)]),
            ],
        )
    };
    let h = Harness::start(v1()).await;
    let envoy = Envoy::start(&bin, h.addr, "DELTA_GRPC").await;
    eventually("every type synced", async || {
        types_synced(&h.server.syncz(), "1")
    })
    .await;
    let addr = h.addr;
    h.shutdown().await;

    let h = Harness::start_at(v1(), addr).await;
    eventually(
        "reconnected, every type in sync, nothing sent",
        async || {
            let syncz = h.server.syncz();
            syncz[0]["types"].as_object().is_some_and(|types| {
                types.len() == 4
                    && types.values().all(|t| {
                        t["state"] == "SYNCED" && t["nonce_sent"] == "" && t["resources"] != 0
                    })
            })
        },
    )
    .await;
    assert!(
        !h.metrics().contains("pilot_xds_pushes_total{"),
        "{}",
        h.metrics()
    );
    assert_eq!(get(listener, &host, "/").await, Some((200, "b1".into())));

    let v2 = h.latest().with_changes(2, [endpoint_chunk(port, b2)], []);
    h.update(v2, false, &[service_key(REVIEWS)]).await;
    eventually("traffic to b2", async || {
        get(listener, &host, "/").await == Some((200, "b2".into()))
    })
    .await;
    for stat in [
        "cluster_manager.cds.update_rejected",
        "listener_manager.lds.update_rejected",
    ] {
        assert_eq!(envoy.stat(stat).await, Some(0), "{stat}\n{}", envoy.log());
    }
    assert_eq!(envoy.stat("control_plane.connected_state").await, Some(1));

    drop(envoy.child);
    h.shutdown().await;
}
