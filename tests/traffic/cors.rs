//! CORS: a VirtualService's `corsPolicy` makes Envoy answer browsers' preflight
//! requests from the allowed origins, and grant nothing to other origins.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, Reply, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use reqwest::Method;

const VIRTUAL_SERVICE: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: api
  namespace: traffic
spec:
  hosts: [api]
  http:
  - route: [{destination: {host: api}}]
    corsPolicy:
      allowOrigins:
      - exact: https://a.example
      allowMethods: [GET, POST]
      allowHeaders: [x-token]
      maxAge: "24h"
      allowCredentials: true
"#;

async fn preflight(mesh: &Mesh, port: u16, host: &str, origin: &str) -> Result<Reply, String> {
    mesh.send(
        mesh.request(Method::OPTIONS, port, host, "/orders")
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "x-token"),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_preflight_is_answered_for_allowed_origins_only() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let backend = HttpBackend::start("api-v1").await;
    let port = free_port();
    let host = fqdn("api", CLIENT_NS);
    mesh.write(
        "api.yaml",
        &workloads::service(CLIENT_NS, "api", "http", port, &[backend.workload("v1")]),
    );
    mesh.apply(
        "api-route.yaml",
        VIRTUAL_SERVICE,
        "a preflight from https://a.example allowed",
        async || {
            let r = preflight(&mesh, port, &host, "https://a.example").await?;
            expect(
                r.header("access-control-allow-origin") == Some("https://a.example"),
                r,
            )
        },
    )
    .await;

    let r = preflight(&mesh, port, &host, "https://a.example")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", mesh.logs()));
    assert_eq!(r.status, 200, "preflight: {r}");
    let methods = r.header("access-control-allow-methods").unwrap_or_default();
    assert!(
        methods.contains("GET") && methods.contains("POST"),
        "allowed methods: {r}"
    );
    assert!(
        r.header("access-control-allow-headers")
            .is_some_and(|h| h.contains("x-token")),
        "allowed headers: {r}"
    );
    assert_eq!(r.header("access-control-max-age"), Some("86400"), "{r}");
    assert_eq!(
        r.header("access-control-allow-credentials"),
        Some("true"),
        "{r}"
    );

    let r = preflight(&mesh, port, &host, "https://b.example")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", mesh.logs()));
    assert_eq!(
        r.header("access-control-allow-origin"),
        None,
        "an origin not in allowOrigins is granted nothing: {r}"
    );
    mesh.finish().await;
}
