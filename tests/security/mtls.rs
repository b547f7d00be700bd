//! The mesh's mTLS as Shoal generates it, between two real Envoys fed by agent
//! stand-ins: auto mTLS from `a` to `b` (b's pod labelled `security.istio.io/tlsMode:
//! istio`), b's inbound chains by PeerAuthentication — PERMISSIVE accepts the mTLS and a
//! plaintext client, STRICT then refuses the plaintext client while a keeps its
//! requests, DISABLE turns the mesh's mTLS off (a sends plaintext, which b accepts).
//! `a` speaks SotW ADS and `b` Delta. Workloads are not captured: a's outbound
//! listeners bind its pod address, and b's inbound listener is its Sidecar's `ingress`
//! (captureMode NONE) on its pod address.

use crate::bootstrap::{Node, bootstrap};
use crate::k8s::namespace;
use crate::mesh::{Mesh, spiffe};
use crate::support::envoy::Envoy;
use crate::support::{backend, free_port};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);
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

async fn get(http: &reqwest::Client, url: &str, host: &str) -> Result<String, String> {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecars_talk_mesh_mtls_and_peer_authentication_decides_what_b_accepts() {
    let _serial = crate::SERIAL.lock().await;
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
    let [admin_a, admin_b] = [0; 2].map(|_| free_port());
    let labels = |app: &str| format!("{{app: {app}, {MESHED}}}");
    let (labels_a, labels_b) = (labels("a"), labels("b"));
    let env_a = Envoy::start(
        "a-envoy",
        &bootstrap(
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
            admin_a,
            None,
        ),
        admin_a,
        mesh.dir.path(),
    );
    let env_b = Envoy::start(
        "b-envoy",
        &bootstrap(
            &Node {
                kind: "sidecar",
                ip: "127.0.0.3",
                namespace: "beta",
                pod: "b-0",
                service_account: "b",
                labels: &labels_b,
                api_type: "DELTA_GRPC",
            },
            &agent_b,
            admin_b,
            None,
        ),
        admin_b,
        mesh.dir.path(),
    );
    let logs = || {
        format!(
            "--- a envoy ---\n{}\n--- b envoy ---\n{}\n--- b agent ---\n{}",
            env_a.proc.tail(15),
            env_b.proc.tail(15),
            agent_b.proc.tail(10)
        )
    };
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let host = "b.beta.svc.cluster.local";
    let via_a = format!("http://127.0.0.2:{svc_port}/");
    let direct = format!("http://127.0.0.3:{b_in}/");
    let b_listener = format!("listener.127.0.0.3_{b_in}");
    let handshakes = async || env_b.stat(&format!("{b_listener}.ssl.handshake")).await;

    // PERMISSIVE (no policy): a reaches b over the mesh's mTLS (b's listener counts TLS
    // handshakes), and a plaintext client is accepted too.
    mesh.eventually(
        &format!("a → b over mTLS; {}", logs()),
        LONG,
        async || {
            let body = get(&http, &via_a, host).await?;
            let n = handshakes().await;
            if body == "b" && n > 0 {
                Ok(())
            } else {
                Err(format!("answered {body:?}, {n} TLS handshakes at b"))
            }
        },
    )
    .await;
    let before = handshakes().await;
    assert_eq!(get(&http, &direct, host).await.as_deref(), Ok("b"));
    assert_eq!(
        handshakes().await,
        before,
        "the direct request was plaintext"
    );
    let syncz = mesh.syncz().await;
    assert!(syncz.contains(&spiffe("beta", "b")), "{syncz}");

    // STRICT in beta: plaintext refused, a's mTLS still served.
    let pa = mesh.dir.path().join("config/pa.yaml");
    std::fs::write(&pa, peer_authentication("beta", "STRICT")).unwrap();
    mesh.eventually(
        &format!("plaintext refused; {}", logs()),
        LONG,
        async || match get(&http, &direct, host).await {
            Err(_) => Ok(()),
            Ok(body) => Err(format!("a plaintext client was answered {body:?}")),
        },
    )
    .await;
    for _ in 0..5 {
        assert_eq!(
            get(&http, &via_a, host).await.as_deref(),
            Ok("b"),
            "{}",
            logs()
        );
    }

    // DISABLE: a sends plaintext (auto mTLS follows b's namespace), b accepts it.
    std::fs::write(&pa, peer_authentication("beta", "DISABLE")).unwrap();
    mesh.eventually(&format!("plaintext again; {}", logs()), LONG, async || {
        get(&http, &direct, host).await.map(|_| ())
    })
    .await;
    let before = handshakes().await;
    assert_eq!(get(&http, &via_a, host).await.as_deref(), Ok("b"));
    assert_eq!(
        handshakes().await,
        before,
        "a spoke plaintext to a DISABLEd namespace"
    );
}
