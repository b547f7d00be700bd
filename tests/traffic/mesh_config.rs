//! The mesh config, as istiod reads it (ConfigMap `istio`, key `mesh`, in
//! `istio-system`): `defaultServiceExportTo: ["."]` hides another namespace's Service
//! from the client until the Service's own `networking.istio.io/exportTo` annotation
//! exports it; `outboundTrafficPolicy: REGISTRY_ONLY` makes Envoy refuse unknown hosts
//! with no Sidecar saying so.
//!
//! As in `registry_only`, the unknown host is requested only once REGISTRY_ONLY is in
//! Envoy's routes (under ALLOW_ANY it would loop through Envoy's own listener).

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

const OTHER_NS: &str = "other";

fn mesh_config(mesh: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: istio
  namespace: istio-system
data:
  mesh: |-
{}
"#,
        mesh.lines()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    )
}

/// The Service of `workloads::service` with an `exportTo` annotation.
fn exported(service: &str, namespace: &str, export_to: &str) -> String {
    service.replacen(
        &format!("  namespace: {namespace}\nspec:"),
        &format!(
            "  namespace: {namespace}\n  annotations:\n    networking.istio.io/exportTo: \"{export_to}\"\nspec:"
        ),
        1,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesh_config_sets_export_defaults_and_the_outbound_policy() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
    let home = HttpBackend::start("home-v1").await;
    let away = HttpBackend::start("away-v1").await;
    // Distinct ports: hidden `away` then has no listener at all.
    let (home_port, away_port) = (free_port(), free_port());
    let (home_host, away_host) = (fqdn("home", CLIENT_NS), fqdn("away", OTHER_NS));
    let away_service =
        workloads::service(OTHER_NS, "away", "http", away_port, &[away.workload("v1")]);
    mesh.write(
        "home.yaml",
        &workloads::service(CLIENT_NS, "home", "http", home_port, &[home.workload("v1")]),
    );
    mesh.write("other-namespace.yaml", &workloads::namespace(OTHER_NS));
    mesh.write("other/away.yaml", &away_service);
    mesh.eventually("both namespaces' services served", async || {
        mesh.get(home_port, &home_host, "/").await?.served_by()?;
        mesh.get(away_port, &away_host, "/")
            .await?
            .served_by()
            .map(|_| ())
    })
    .await;

    let unreachable = async || match mesh.get(away_port, &away_host, "/").await {
        Err(_no_answer) => Ok(()),
        Ok(r) => expect(matches!(r.status, 404 | 502), r),
    };
    mesh.apply(
        "istio-system/mesh.yaml",
        &mesh_config("defaultServiceExportTo: [\".\"]"),
        "the other namespace's service hidden by the mesh-wide default",
        unreachable,
    )
    .await;
    let r = mesh.must_get(home_port, &home_host, "/").await;
    assert_eq!(
        r.served_by(),
        Ok("home-v1"),
        "the client's own namespace stays visible\n{}",
        mesh.logs()
    );

    mesh.apply(
        "other/away.yaml",
        &exported(&away_service, OTHER_NS, "*"),
        "the service exported by its own annotation",
        async || {
            mesh.get(away_port, &away_host, "/")
                .await?
                .served_by()
                .map(|_| ())
        },
    )
    .await;

    mesh.apply(
        "istio-system/mesh.yaml",
        &mesh_config(
            "defaultServiceExportTo: [\".\"]\noutboundTrafficPolicy:\n  mode: REGISTRY_ONLY",
        ),
        "the block_all catch-all from the mesh config",
        async || {
            let dump = mesh.config_dump("dynamic_route_configs").await;
            expect(
                dump.contains("\"block_all\"") && !dump.contains("\"allow_any\""),
                "no block_all catch-all yet",
            )
        },
    )
    .await;
    let unknown = mesh.must_get(home_port, "unknown.example.com", "/").await;
    assert_eq!(
        unknown.status,
        502,
        "an unknown host under the mesh's REGISTRY_ONLY: {unknown}\n{}",
        mesh.logs()
    );
    assert_eq!(unknown.backend(), None, "no backend may answer: {unknown}");
    let known = mesh.must_get(away_port, &away_host, "/").await;
    assert_eq!(
        known.served_by(),
        Ok("away-v1"),
        "a known service still works"
    );
    mesh.finish().await;
}
