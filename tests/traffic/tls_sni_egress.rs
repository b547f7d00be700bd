//! HTTPS egress by SNI: two DNS ServiceEntries on one TLS port, neither with an
//! address, share the sidecar's listener for that port; the TLS inspector reads the
//! server name each client sends and picks the entry's cluster, so each reaches its own
//! TLS backend (the client's TLS passes through Envoy untouched). A VirtualService `tls`
//! route (`sniHosts`) then sends one name to the other entry's backend.

use crate::SERIAL;
use crate::backend::tls::{TestPki, get_backend};
use crate::backend::{Backend, HttpBackend};
use crate::harness::{Mesh, expect};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

const ALPHA: &str = "alpha.example.test";
const BETA: &str = "beta.example.test";

fn service_entry(name: &str, host: &str, port: u16, endpoint_port: u16) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: {name}
  namespace: traffic
spec:
  hosts: [{host}]
  location: MESH_EXTERNAL
  resolution: DNS
  ports:
  - {{number: {port}, name: tls, protocol: TLS}}
  endpoints:
  - address: localhost
    ports: {{tls: {endpoint_port}}}
"#
    )
}

fn tls_route(port: u16) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: beta-to-alpha
  namespace: traffic
spec:
  hosts: [{BETA}]
  tls:
  - match:
    - {{sniHosts: [{BETA}], port: {port}}}
    route:
    - destination: {{host: {ALPHA}, port: {{number: {port}}}}}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_service_entries_on_one_tls_port_are_told_apart_by_sni() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let files = tempfile::tempdir().expect("tempdir");
    let pki = TestPki::new(files.path());
    // Alpha's certificate also names beta, for when the tls route sends beta there.
    let alpha = HttpBackend::start_tls("alpha-api", pki.server_config(&[ALPHA, BETA], false)).await;
    let beta = HttpBackend::start_tls("beta-api", pki.server_config(&[BETA], false)).await;
    let client = pki.client_config();
    let port = free_port();
    mesh.write(
        "alpha.yaml",
        &service_entry("alpha", ALPHA, port, alpha.port()),
    );
    mesh.write("beta.yaml", &service_entry("beta", BETA, port, beta.port()));
    mesh.eventually("each name served by its own backend", async || {
        let a = get_backend(client.clone(), port, ALPHA).await?;
        let b = get_backend(client.clone(), port, BETA).await?;
        expect(
            a == alpha.name() && b == beta.name(),
            format!("{ALPHA} → {a}, {BETA} → {b}"),
        )
    })
    .await;
    for _ in 0..5 {
        for (host, backend) in [(ALPHA, alpha.name()), (BETA, beta.name())] {
            let got = get_backend(client.clone(), port, host).await;
            assert_eq!(got.as_deref(), Ok(backend), "{host}\n{}", mesh.logs());
        }
    }
    // The client's own TLS reached the backends: they saw its SNI.
    assert!(
        beta.received()
            .iter()
            .all(|r| r.header("x-tls-sni") == Some(BETA))
    );

    mesh.apply(
        "beta-route.yaml",
        &tls_route(port),
        "the tls route sending beta to alpha's backend",
        async || {
            let b = get_backend(client.clone(), port, BETA).await?;
            expect(b == alpha.name(), format!("{BETA} → {b}"))
        },
    )
    .await;
    let a = get_backend(client.clone(), port, ALPHA).await;
    assert_eq!(a.as_deref(), Ok(alpha.name()), "{ALPHA} is untouched");
    mesh.finish().await;
}
