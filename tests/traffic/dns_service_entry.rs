//! A DNS ServiceEntry: an external API the mesh reaches by a DNS name. Envoy resolves
//! the entry's endpoint address itself (a STRICT_DNS cluster) and routes the entry's
//! host to it.
//!
//! The endpoint is `localhost` with its own port (`ports: {http: ...}`), as a user
//! points an entry at an API whose DNS name and port differ from the host clients use.
//! An entry without endpoints would resolve its host at the entry's port, which here
//! is Envoy's own listener.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::Mesh;
use crate::support::envoy::XdsApi;
use crate::support::free_port;

const HOST: &str = "payments.example.test";

fn service_entry(port: u16, endpoint_port: u16) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: payments-api
  namespace: traffic
spec:
  hosts: [{HOST}]
  location: MESH_EXTERNAL
  resolution: DNS
  ports:
  - {{number: {port}, name: http, protocol: HTTP}}
  endpoints:
  - address: localhost
    ports: {{http: {endpoint_port}}}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_service_entry_routes_to_the_resolved_endpoint() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
    let backend = HttpBackend::start("payments-api").await;
    let port = free_port();
    mesh.apply(
        "payments-entry.yaml",
        &service_entry(port, backend.port()),
        "the ServiceEntry host served by the backend",
        async || {
            mesh.get(port, HOST, "/charge")
                .await?
                .served_by()
                .map(|_| ())
        },
    )
    .await;

    for _ in 0..10 {
        let r = mesh.must_get(port, HOST, "/charge").await;
        assert_eq!(
            r.served_by(),
            Ok("payments-api"),
            "{HOST} through the entry"
        );
    }
    let seen = backend.received();
    assert!(
        seen.iter()
            .all(|r| r.path == "/charge" && r.header("host") == Some(HOST)),
        "the backend should see the client's path and host: {seen:?}"
    );
    // Envoy resolved `localhost` itself: its cluster's host is the loopback address.
    let clusters = reqwest::get(mesh.envoy.admin("/clusters"))
        .await
        .expect("envoy /clusters")
        .text()
        .await
        .expect("clusters body");
    let resolved = format!("outbound|{port}||{HOST}::127.0.0.1:{}::", backend.port());
    assert!(
        clusters.lines().any(|l| l.starts_with(&resolved)),
        "expected a host {resolved}… in Envoy's /clusters:\n{}",
        clusters
            .lines()
            .filter(|l| l.contains(HOST))
            .collect::<Vec<_>>()
            .join("\n")
    );
    mesh.finish().await;
}
