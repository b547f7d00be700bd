//! `outboundTrafficPolicy: REGISTRY_ONLY`: a Sidecar that allows only services the
//! mesh knows makes Envoy refuse other hosts with 502, while known services still work.
//!
//! The unknown host is only ever requested under REGISTRY_ONLY. Under ALLOW_ANY, the
//! catch-all forwards it to its original destination, which without interception is
//! Envoy's own listener: the request would loop through Envoy. So the switch back to
//! ALLOW_ANY is checked in the route configuration Envoy holds, not with traffic.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

fn sidecar(mode: &str) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata:
  name: default
  namespace: traffic
spec:
  egress:
  - hosts: ["*/*"]
  outboundTrafficPolicy:
    mode: {mode}
"#
    )
}

/// The catch-all virtual host of the route configuration for `port`, as Envoy holds it.
async fn catch_all(mesh: &Mesh, port: u16) -> Result<&'static str, String> {
    let dump = mesh.config_dump("dynamic_route_configs").await;
    let name = port.to_string();
    let json: serde_json::Value =
        serde_json::from_str(&dump).map_err(|e| format!("config_dump: {e}: {dump}"))?;
    let config = json["configs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| &c["route_config"])
        .find(|c| c["name"] == name.as_str())
        .ok_or_else(|| format!("no route configuration {port:?} in Envoy"))?;
    let names: Vec<&str> = config["virtual_hosts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .collect();
    ["block_all", "allow_any"]
        .into_iter()
        .find(|c| names.contains(c))
        .ok_or_else(|| format!("no catch-all among the virtual hosts {names:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_only_refuses_unknown_hosts_and_serves_known_ones() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
    let backend = HttpBackend::start("catalog-v1").await;
    let port = free_port();
    let host = fqdn("catalog", CLIENT_NS);
    mesh.write(
        "catalog.yaml",
        &workloads::service(
            CLIENT_NS,
            "catalog",
            "http",
            port,
            &[backend.workload("v1")],
        ),
    );
    mesh.eventually("catalog served", async || {
        mesh.get(port, &host, "/").await?.served_by().map(|_| ())
    })
    .await;

    mesh.apply(
        "sidecar.yaml",
        &sidecar("REGISTRY_ONLY"),
        "the block_all catch-all on the catalog port",
        async || {
            let c = catch_all(&mesh, port).await?;
            expect(c == "block_all", c)
        },
    )
    .await;
    let unknown = mesh.must_get(port, "unknown.example.com", "/").await;
    assert_eq!(
        unknown.status,
        502,
        "an unknown host under REGISTRY_ONLY: {unknown}\n{}",
        mesh.logs()
    );
    assert_eq!(unknown.backend(), None, "no backend may answer: {unknown}");
    let known = mesh.must_get(port, &host, "/").await;
    assert_eq!(
        known.served_by(),
        Ok("catalog-v1"),
        "a known service under REGISTRY_ONLY"
    );

    mesh.apply(
        "sidecar.yaml",
        &sidecar("ALLOW_ANY"),
        "the allow_any catch-all on the catalog port",
        async || {
            let c = catch_all(&mesh, port).await?;
            expect(c == "allow_any", c)
        },
    )
    .await;
    let known = mesh.must_get(port, &host, "/").await;
    assert_eq!(
        known.served_by(),
        Ok("catalog-v1"),
        "a known service under ALLOW_ANY"
    );
    mesh.finish().await;
}
