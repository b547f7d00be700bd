//! Proxyless gRPC: a real Python `grpcio` client with an `xds:///` target, configured
//! by the all-in-one `shoal` over xDS (node metadata `GENERATOR: grpc`), calling two
//! real grpcio servers that are the endpoints of one Kubernetes Service.
//!
//! ```text
//!  test ── write YAML ──► config dir ──watch──► shoal ──ADS (LDS, RDS, CDS, EDS)──┐
//!  client.py  xds:///echo.grpc.svc.cluster.local:<port>  ◄───────────────────────┘
//!     └── gRPC ──► server.py echo-v1 (version: v1) | server.py echo-v2 (version: v2)
//! ```
//!
//! gRPC clients take only part of what Envoy takes; the routes here use what they do
//! take: weighted subsets and header matches.
//!
//! `security.rs`: the same workloads as xDS servers and an xDS-credentials client, with
//! mTLS and AuthorizationPolicy (gRPC's xDS client speaks SotW ADS only, so there is no
//! Delta flavour of these tests).
//!
//! Run `cargo build --bins -p shoal` first; Python comes from `.venv/bin/python` (with
//! `grpcio` from `deploy/requirements-test.txt`) or `SHOAL_PYTHON`.

#[path = "../support/mod.rs"]
mod support;

mod config;
mod harness;
// The test PKI of the security tests: Shoal's plug-in CA and the workloads' certificates.
#[allow(dead_code)]
#[path = "../security/pki.rs"]
mod pki;
mod security;

use harness::Mesh;

fn virtual_service(v1: u32, v2: u32) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: echo
  namespace: {ns}
spec:
  hosts: [echo]
  http:
  - route:
    - destination: {{host: echo, subset: v1}}
      weight: {v1}
    - destination: {{host: echo, subset: v2}}
      weight: {v2}
"#,
        ns = config::NS
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxyless_client_follows_virtual_service_weights() {
    let mesh = Mesh::start(&[]).await;

    // No VirtualService: the default route balances over both endpoints.
    mesh.wait_for_calls("calls answered by both servers", |calls| {
        let v1 = calls.iter().any(|c| c == "ok echo-v1");
        let v2 = calls.iter().any(|c| c == "ok echo-v2");
        v1 && v2
    })
    .await;

    // All to subset v1, then all to v2: 20 answers in a row from one server cannot come
    // from round robin over both.
    for ((v1, v2), server) in [((100, 0), "echo-v1"), ((0, 100), "echo-v2")] {
        let from = mesh.calls().len();
        mesh.write("echo-route.yaml", &virtual_service(v1, v2));
        let want = format!("ok {server}");
        mesh.wait_for_calls(&format!("20 answers in a row from {server}"), |calls| {
            let recent = &calls[from.min(calls.len())..];
            recent.len() >= 20 && recent[recent.len() - 20..].iter().all(|c| *c == want)
        })
        .await;
    }

    mesh.finish().await;
}

/// Calls with `end-user: jason` to v2, the others to v1.
fn header_route() -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: echo
  namespace: {ns}
spec:
  hosts: [{host}]
  http:
  - match:
    - headers:
        end-user: {{exact: jason}}
    route:
    - destination: {{host: echo, subset: v2}}
  - route:
    - destination: {{host: echo, subset: v1}}
"#,
        ns = config::NS,
        host = config::fqdn("echo")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxyless_client_is_routed_by_its_request_headers() {
    // The client sends `end-user: jason` with every call.
    let mesh = Mesh::start(&[("end-user", "jason")]).await;
    mesh.wait_for_calls("a first answer", |calls| {
        calls.iter().any(|c| c.starts_with("ok "))
    })
    .await;
    let from = mesh.calls().len();
    mesh.write("echo-route.yaml", &header_route());
    mesh.wait_for_calls("20 answers in a row from echo-v2 (header match)", |calls| {
        let recent = &calls[from.min(calls.len())..];
        recent.len() >= 20
            && recent[recent.len() - 20..]
                .iter()
                .all(|c| c == "ok echo-v2")
    })
    .await;
    mesh.finish().await;
}
