//! Cross-network traffic through an east-west gateway, as Istio's multi-network install
//! runs it, between three real Envoys fed by agent stand-ins of one Shoal all-in-one:
//!
//! ```text
//!  net-1                     net-2
//!  a (127.0.0.2, SotW) ──mTLS, SNI outbound_.<port>_._.b.beta.svc.cluster.local──►
//!      east-west gateway (127.0.0.5, Gateway 15443 AUTO_PASSTHROUGH "*.local")
//!        └─ SNI-DNAT cluster, the mTLS untouched ──► b (127.0.0.3, Delta, STRICT) ─► app
//! ```
//!
//! a's EDS gives b's endpoint as net-2's gateway (the Service labelled
//! `topology.istio.io/network: net-2`, at its load balancer address); a keeps the mesh's
//! mTLS to it; the gateway forwards by SNI to b's own network's endpoint; b's STRICT
//! inbound terminates the mTLS a started. A proxy's network is its node metadata
//! `NETWORK`, a workload's its pod label `topology.istio.io/network`.

use crate::bootstrap::Node;
use crate::k8s::namespace;
use crate::mesh::{Agent, Mesh};
use crate::support::envoy::Envoy;
use crate::support::{backend, free_port};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);
const GATEWAY_IP: &str = "127.0.0.5";
const HOST: &str = "b.beta.svc.cluster.local";

/// b in beta, on net-2: its Service, Pod (meshed, service account `b`), EndpointSlice,
/// its Sidecar's ingress (captureMode NONE) on its pod address in front of `app`, and
/// STRICT mTLS in beta.
fn workload_b(svc_port: u16, b_in: u16, app: u16) -> String {
    format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: b, namespace: beta}}
spec:
  selector: {{app: b}}
  ports: [{{name: http, port: {svc_port}, targetPort: {b_in}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: b-0
  namespace: beta
  labels: {{app: b, security.istio.io/tlsMode: istio, topology.istio.io/network: net-2}}
spec: {{serviceAccountName: b}}
status:
  podIP: 127.0.0.3
  conditions: [{{type: Ready, status: "True"}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: b-0
  namespace: beta
  labels: {{kubernetes.io/service-name: b}}
addressType: IPv4
ports: [{{name: http, port: {b_in}}}]
endpoints:
- addresses: [127.0.0.3]
  conditions: {{ready: true}}
  targetRef: {{kind: Pod, name: b-0, namespace: beta}}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: b, namespace: beta}}
spec:
  workloadSelector: {{labels: {{app: b}}}}
  ingress:
  - port: {{number: {b_in}, protocol: HTTP, name: http}}
    bind: 127.0.0.3
    captureMode: NONE
    defaultEndpoint: 127.0.0.1:{app}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {{name: default, namespace: beta}}
spec:
  mtls: {{mode: STRICT}}
"#
    )
}

/// net-2's east-west gateway, as Istio's multi-network install makes it: the Service
/// (labelled with its network, reached at its load balancer address on `gw_port`), its
/// Pod, and the Gateway passing `*.local` through by SNI on 15443 (which the router
/// listens for on `gw_port`, the Service's target port).
fn eastwest_gateway(gw_port: u16) -> String {
    format!(
        r#"apiVersion: v1
kind: Service
metadata:
  name: istio-eastwestgateway
  namespace: istio-system
  labels: {{topology.istio.io/network: net-2, networking.istio.io/gatewayPort: "{gw_port}"}}
spec:
  type: LoadBalancer
  selector: {{istio: eastwestgateway}}
  ports: [{{name: tls, port: 15443, targetPort: {gw_port}}}]
status:
  loadBalancer:
    ingress: [{{ip: {GATEWAY_IP}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: eastwest-0
  namespace: istio-system
  labels: {{istio: eastwestgateway, topology.istio.io/network: net-2}}
spec: {{serviceAccountName: istio-eastwestgateway}}
status:
  podIP: {GATEWAY_IP}
  conditions: [{{type: Ready, status: "True"}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: istio-eastwestgateway
  namespace: istio-system
  labels: {{kubernetes.io/service-name: istio-eastwestgateway}}
addressType: IPv4
ports: [{{name: tls, port: {gw_port}}}]
endpoints:
- addresses: [{GATEWAY_IP}]
  conditions: {{ready: true}}
  targetRef: {{kind: Pod, name: eastwest-0, namespace: istio-system}}
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: cross-network-gateway, namespace: istio-system}}
spec:
  selector: {{istio: eastwestgateway}}
  servers:
  - port: {{number: 15443, name: tls, protocol: TLS}}
    tls: {{mode: AUTO_PASSTHROUGH}}
    hosts: ["*.local"]
"#
    )
}

/// A real Envoy for `node` on `network` (its node metadata `NETWORK`), behind `agent`.
fn envoy_on(mesh: &Mesh, name: &str, node: &Node<'_>, agent: &Agent, network: &str) -> Envoy {
    let admin = free_port();
    let yaml = crate::bootstrap::bootstrap(node, agent, admin, None).replacen(
        "  metadata:\n",
        &format!("  metadata:\n    NETWORK: {network}\n"),
        1,
    );
    Envoy::start(name, &yaml, admin, mesh.dir.path())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reaches_b_on_another_network_through_the_east_west_gateway_over_mtls() {
    let _serial = crate::SERIAL.lock().await;
    let app = backend::start("b", "127.0.0.1").await;
    let (svc_port, b_in, gw_port) = (free_port(), free_port(), free_port());
    let config = vec![
        (
            "ns.yaml",
            ["alpha", "beta", "istio-system"]
                .map(namespace)
                .join("---\n"),
        ),
        ("b.yaml", workload_b(svc_port, b_in, app.addr.port())),
        ("eastwest.yaml", eastwest_gateway(gw_port)),
    ];
    let mesh = Mesh::start(&config, &[]).await;
    let meshed = |app: &str| format!("{{app: {app}, security.istio.io/tlsMode: istio}}");
    let agent_a = mesh.agent("a", "alpha", "a", "1h");
    let env_a = envoy_on(
        &mesh,
        "a-envoy",
        &Node {
            kind: "sidecar",
            ip: "127.0.0.2",
            namespace: "alpha",
            pod: "a-0",
            service_account: "a",
            labels: &meshed("a"),
            api_type: "GRPC",
        },
        &agent_a,
        "net-1",
    );
    let agent_gw = mesh.agent("eastwest", "istio-system", "istio-eastwestgateway", "1h");
    let env_gw = envoy_on(
        &mesh,
        "eastwest-envoy",
        &Node {
            kind: "router",
            ip: GATEWAY_IP,
            namespace: "istio-system",
            pod: "eastwest-0",
            service_account: "istio-eastwestgateway",
            labels: "{istio: eastwestgateway}",
            api_type: "GRPC",
        },
        &agent_gw,
        "net-2",
    );
    let agent_b = mesh.agent("b", "beta", "b", "1h");
    let env_b = envoy_on(
        &mesh,
        "b-envoy",
        &Node {
            kind: "sidecar",
            ip: "127.0.0.3",
            namespace: "beta",
            pod: "b-0",
            service_account: "b",
            labels: &meshed("b"),
            api_type: "DELTA_GRPC",
        },
        &agent_b,
        "net-2",
    );
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let logs = || {
        format!(
            "--- a envoy ---\n{}\n--- gateway envoy ---\n{}\n--- b envoy ---\n{}",
            env_a.proc.tail(15),
            env_gw.proc.tail(15),
            env_b.proc.tail(15)
        )
    };
    let sni_cluster = format!("outbound_.{svc_port}_._.{HOST}");
    let gateway_connections = async || {
        env_gw
            .stat(&format!("cluster.{sni_cluster}.upstream_cx_total"))
            .await
    };
    let b_handshakes = async || {
        env_b
            .stat(&format!("listener.127.0.0.3_{b_in}.ssl.handshake"))
            .await
    };
    let via_a = format!("http://127.0.0.2:{svc_port}/");

    mesh.eventually("a → gateway → b over mTLS", LONG, async || {
        let resp = http
            .get(&via_a)
            .header("host", HOST)
            .send()
            .await
            .map_err(|e| format!("GET {via_a}: {e}\n{}", logs()))?;
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        let (through, handshakes) = (gateway_connections().await, b_handshakes().await);
        if status.is_success() && body == "b" && through > 0 && handshakes > 0 {
            Ok(())
        } else {
            Err(format!(
                "{status} {body:?}; {through} connections through {sni_cluster}, \
                     {handshakes} TLS handshakes at b\n{}",
                logs()
            ))
        }
    })
    .await;

    // Every request goes through the gateway (b's pod address is on net-2), still the
    // mTLS a started: b is STRICT and refuses a plaintext client.
    let sent = async || {
        env_gw
            .stat(&format!("cluster.{sni_cluster}.upstream_cx_tx_bytes_total"))
            .await
    };
    for _ in 0..3 {
        let before = sent().await;
        let body = http
            .get(&via_a)
            .header("host", HOST)
            .send()
            .await
            .expect("a → b")
            .text()
            .await
            .unwrap();
        assert_eq!(body, "b", "{}", logs());
        assert!(sent().await > before, "not through the gateway\n{}", logs());
    }
    let plaintext = http
        .get(format!("http://127.0.0.3:{b_in}/"))
        .header("host", HOST)
        .send()
        .await;
    assert!(
        plaintext.is_err() || !plaintext.unwrap().status().is_success(),
        "b is STRICT: a plaintext client is refused"
    );
    let hosts = reqwest::get(env_a.admin("/clusters"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let gateway_host = format!("outbound|{svc_port}||{HOST}::{GATEWAY_IP}:{gw_port}");
    assert!(
        hosts.contains(&gateway_host),
        "a reaches b through the gateway only:\n{hosts}"
    );
    assert!(
        !hosts.contains(&format!("outbound|{svc_port}||{HOST}::127.0.0.3:")),
        "b's pod address is on another network:\n{hosts}"
    );
}
