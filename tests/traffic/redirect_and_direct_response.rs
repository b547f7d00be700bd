//! Answers Envoy gives itself, without a backend: a VirtualService `redirect` and a
//! `directResponse`.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

const REDIRECT: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: legacy
  namespace: traffic
spec:
  hosts: [legacy]
  http:
  - name: moved
    match: [{uri: {prefix: /old}}]
    redirect:
      uri: /new
      authority: other.example
      redirectCode: 302
  - route: [{destination: {host: legacy}}]
"#;

// Its own VirtualService: until issue 8, Shoal rejects a route that has neither
// `route` nor `redirect`, and with it every other route of the VirtualService.
const DIRECT_RESPONSE: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: legacy
  namespace: traffic
spec:
  hosts: [legacy]
  http:
  - name: maintenance
    match: [{uri: {prefix: /maintenance}}]
    directResponse:
      status: 503
      body: {string: down}
  - route: [{destination: {host: legacy}}]
"#;

/// Starts a mesh with the `legacy` service and `virtual_service` for it.
async fn legacy_mesh(api: XdsApi, virtual_service: &str) -> (Mesh, HttpBackend, u16) {
    let mesh = Mesh::start(api).await;
    let backend = HttpBackend::start("legacy-v1").await;
    let port = free_port();
    mesh.write(
        "legacy.yaml",
        &workloads::service(CLIENT_NS, "legacy", "http", port, &[backend.workload("v1")]),
    );
    mesh.write("legacy-route.yaml", virtual_service);
    (mesh, backend, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_answers_302_with_the_new_location() {
    let _serial = SERIAL.lock().await;
    let (mesh, backend, port) = legacy_mesh(XdsApi::Delta, REDIRECT).await;
    let host = fqdn("legacy", CLIENT_NS);
    mesh.eventually("a redirect on /old", async || {
        let r = mesh.get(port, &host, "/old").await?;
        expect(r.status == 302, r)
    })
    .await;
    backend.clear_received();
    let r = mesh.must_get(port, &host, "/old/page").await;
    assert_eq!(r.status, 302, "{r}");
    assert_eq!(
        r.header("location"),
        Some("http://other.example/new"),
        "the redirect's authority and uri: {r}"
    );
    assert_eq!(
        backend.received_count(),
        0,
        "a redirect never reaches the backend"
    );
    mesh.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_response_answers_without_a_backend() {
    let _serial = SERIAL.lock().await;
    let (mesh, backend, port) = legacy_mesh(XdsApi::Sotw, DIRECT_RESPONSE).await;
    let host = fqdn("legacy", CLIENT_NS);
    mesh.eventually("the direct response on /maintenance", async || {
        let r = mesh.get(port, &host, "/maintenance").await?;
        expect(r.status == 503 && r.body == "down", r)
    })
    .await;
    backend.clear_received();
    let r = mesh.must_get(port, &host, "/maintenance/status").await;
    assert_eq!((r.status, r.body.as_str()), (503, "down"), "{r}");
    assert_eq!(
        backend.received_count(),
        0,
        "a direct response never reaches the backend"
    );
    mesh.finish().await;
}
