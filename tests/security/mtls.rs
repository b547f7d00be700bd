//! The mesh's mTLS as Shoal generates it, between two real Envoys fed by agent
//! stand-ins: auto mTLS from `a` to `b` (b's pod labelled `security.istio.io/tlsMode:
//! istio`), b's inbound chains by PeerAuthentication — PERMISSIVE accepts the mTLS and a
//! plaintext client, STRICT then refuses the plaintext client while a keeps its
//! requests, DISABLE turns the mesh's mTLS off (a sends plaintext, which b accepts).
//! `a` speaks SotW ADS and `b` Delta. Workloads are not captured: a's outbound
//! listeners bind its pod address, and b's inbound listener is its Sidecar's `ingress`
//! (captureMode NONE) on its pod address.

use crate::bootstrap::Node;
use crate::k8s::namespace;
use crate::mesh::{Mesh, spiffe};
use crate::support::envoy::Envoy;
use crate::support::{backend, free_port};
use std::time::Duration;

pub const LONG: Duration = Duration::from_secs(60);
const MESHED: &str = "security.istio.io/tlsMode: istio";

/// A Service `name` in `ns` on `port`, one ready Pod at `ip` (service account `name`,
/// labelled for the mesh) serving `target`.
fn meshed_service(ns: &str, name: &str, ip: &str, port: u16, target: u16) -> String {
    format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {ns}}}
spec:
  selector: {{app: {name}}}
  ports: [{{name: http, port: {port}, targetPort: {target}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}-0
  namespace: {ns}
  labels: {{app: {name}, {MESHED}}}
spec: {{serviceAccountName: {name}}}
status:
  podIP: {ip}
  conditions: [{{type: Ready, status: "True"}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {name}-0
  namespace: {ns}
  labels: {{kubernetes.io/service-name: {name}}}
addressType: IPv4
ports: [{{name: http, port: {target}}}]
endpoints:
- addresses: [{ip}]
  conditions: {{ready: true}}
  targetRef: {{kind: Pod, name: {name}-0, namespace: {ns}}}
"#
    )
}

fn peer_authentication(ns: &str, mode: &str) -> String {
    format!(
        "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {{name: default, namespace: {ns}}}\nspec:\n  mtls: {{mode: {mode}}}\n"
    )
}

/// GET `url` with `host`: the body of a 2xx, else the error.
pub async fn get(http: &reqwest::Client, url: &str, host: &str) -> Result<String, String> {
    let resp = http
        .get(url)
        .header("host", host)
        .send()
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    let status = resp.status();
    let body = resp.text().await.map_err(|e| e.to_string())?;
    if status.is_success() {
        Ok(body)
    } else {
        Err(format!("GET {url}: {status}: {body}"))
    }
}

/// Two meshed workloads: `a` in alpha (its Envoy's outbound listeners on 127.0.0.2) and
/// `b` in beta (its Envoy's inbound listener on 127.0.0.3), fed by agent stand-ins.
pub struct Pair {
    pub mesh: Mesh,
    pub env_a: Envoy,
    pub env_b: Envoy,
    pub agent_b: crate::mesh::Agent,
    pub http: reqwest::Client,
    /// b's service through a's sidecar (the mesh's mTLS).
    pub via_a: String,
    /// b's inbound listener, straight (a client outside the mesh: plaintext).
    pub direct: String,
    pub host: &'static str,
    /// b's inbound listener's stats prefix.
    pub b_listener: String,
    _b_app: backend::Backend,
    _agent_a: crate::mesh::Agent,
}

impl Pair {
    pub async fn start() -> Pair {
        Self::start_with("DELTA_GRPC").await
    }

    /// With b's Envoy on `b_api_type` (`GRPC`: SotW, `DELTA_GRPC`: Delta).
    pub async fn start_with(b_api_type: &'static str) -> Pair {
        let b_app = backend::start("b", "127.0.0.1").await;
        let (svc_port, b_in) = (free_port(), free_port());
        let sidecar = format!(
            r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: b, namespace: beta}}
spec:
  workloadSelector: {{labels: {{app: b}}}}
  ingress:
  - port: {{number: {b_in}, protocol: HTTP, name: http}}
    bind: 127.0.0.3
    captureMode: NONE
    defaultEndpoint: 127.0.0.1:{app}
"#,
            app = b_app.addr.port()
        );
        let config = vec![
            (
                "ns.yaml",
                format!("{}---\n{}", namespace("alpha"), namespace("beta")),
            ),
            (
                "b.yaml",
                meshed_service("beta", "b", "127.0.0.3", svc_port, b_in),
            ),
            ("sidecar.yaml", sidecar),
        ];
        let mesh = Mesh::start(&config, &[]).await;
        let agent_a = mesh.agent("a", "alpha", "a", "1h");
        let agent_b = mesh.agent("b", "beta", "b", "1h");
        let labels = |app: &str| format!("{{app: {app}, {MESHED}}}");
        let (labels_a, labels_b) = (labels("a"), labels("b"));
        let env_a = mesh.envoy(
            "a-envoy",
            &Node {
                kind: "sidecar",
                ip: "127.0.0.2",
                namespace: "alpha",
                pod: "a-0",
                service_account: "a",
                labels: &labels_a,
                api_type: "GRPC",
            },
            &agent_a,
        );
        let env_b = mesh.envoy(
            "b-envoy",
            &Node {
                kind: "sidecar",
                ip: "127.0.0.3",
                namespace: "beta",
                pod: "b-0",
                service_account: "b",
                labels: &labels_b,
                api_type: b_api_type,
            },
            &agent_b,
        );
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        Pair {
            mesh,
            env_a,
            env_b,
            agent_b,
            http,
            via_a: format!("http://127.0.0.2:{svc_port}"),
            direct: format!("http://127.0.0.3:{b_in}"),
            host: "b.beta.svc.cluster.local",
            b_listener: format!("listener.127.0.0.3_{b_in}"),
            _b_app: b_app,
            _agent_a: agent_a,
        }
    }

    pub fn logs(&self) -> String {
        format!(
            "--- a envoy ---\n{}\n--- b envoy ---\n{}\n--- b agent ---\n{}",
            self.env_a.proc.tail(15),
            self.env_b.proc.tail(15),
            self.agent_b.proc.tail(10)
        )
    }

    /// GET `base` + `path` with b's host; the body of a 2xx, else the error.
    pub async fn get(&self, base: &str, path: &str) -> Result<String, String> {
        get(&self.http, &format!("{base}{path}"), self.host).await
    }

    /// Writes `yaml` as `file` in the mesh's config directory (watched).
    pub fn apply(&self, file: &str, yaml: &str) {
        std::fs::write(self.mesh.dir.path().join("config").join(file), yaml).unwrap();
    }

    /// Waits until a→b is served over the mesh's mTLS.
    pub async fn wait_mtls(&self) {
        self.mesh
            .eventually(
                &format!("a → b over mTLS; {}", self.logs()),
                LONG,
                async || {
                    let body = self.get(&self.via_a, "/").await?;
                    let n = self.handshakes().await;
                    if body == "b" && n > 0 {
                        Ok(())
                    } else {
                        Err(format!("answered {body:?}, {n} TLS handshakes at b"))
                    }
                },
            )
            .await;
    }

    pub async fn handshakes(&self) -> u64 {
        self.env_b
            .stat(&format!("{}.ssl.handshake", self.b_listener))
            .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecars_talk_mesh_mtls_and_peer_authentication_decides_what_b_accepts() {
    let _serial = crate::SERIAL.lock().await;
    let pair = Pair::start().await;
    let mesh = &pair.mesh;

    // PERMISSIVE (no policy): a reaches b over the mesh's mTLS (b's listener counts TLS
    // handshakes), and a plaintext client is accepted too.
    pair.wait_mtls().await;
    let before = pair.handshakes().await;
    assert_eq!(pair.get(&pair.direct, "/").await.as_deref(), Ok("b"));
    assert_eq!(
        pair.handshakes().await,
        before,
        "the direct request was plaintext"
    );
    let syncz = mesh.syncz().await;
    assert!(syncz.contains(&spiffe("beta", "b")), "{syncz}");

    // STRICT in beta: plaintext refused, a's mTLS still served.
    pair.apply("pa.yaml", &peer_authentication("beta", "STRICT"));
    mesh.eventually(
        &format!("plaintext refused; {}", pair.logs()),
        LONG,
        async || match pair.get(&pair.direct, "/").await {
            Err(_) => Ok(()),
            Ok(body) => Err(format!("a plaintext client was answered {body:?}")),
        },
    )
    .await;
    for _ in 0..5 {
        assert_eq!(
            pair.get(&pair.via_a, "/").await.as_deref(),
            Ok("b"),
            "{}",
            pair.logs()
        );
    }

    // DISABLE: a sends plaintext (auto mTLS follows b's namespace), b accepts it.
    pair.apply("pa.yaml", &peer_authentication("beta", "DISABLE"));
    mesh.eventually(
        &format!("plaintext again; {}", pair.logs()),
        LONG,
        async || pair.get(&pair.direct, "/").await.map(|_| ()),
    )
    .await;
    mesh.eventually("a's cluster back to plaintext", LONG, async || {
        let before = pair.handshakes().await;
        let body = pair.get(&pair.via_a, "/").await?;
        let after = pair.handshakes().await;
        if body == "b" && after == before {
            Ok(())
        } else {
            Err(format!("answered {body:?}; handshakes {before} → {after}"))
        }
    })
    .await;
}
