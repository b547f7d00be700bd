//! Which Sidecar applies, as Istio chooses: the root namespace's selector-less Sidecar is
//! the mesh-wide default; a Sidecar in the workload's namespace whose `workloadSelector`
//! matches its labels wins over it; one selecting other workloads changes nothing.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

const OTHER_NS: &str = "other";

const ROOT_DEFAULT: &str = r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata:
  name: default
  namespace: istio-system
spec:
  egress:
  - hosts: ["./*"]
"#;

/// A Sidecar in the client's namespace selecting `app: <app>`, seeing every namespace.
fn selecting(app: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata:\n  name: for-{app}\n  namespace: {CLIENT_NS}\nspec:\n  workloadSelector:\n    labels: {{app: {app}}}\n  egress:\n  - hosts: [\"*/*\"]\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_default_applies_until_a_sidecar_selects_the_workload() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
    let away = HttpBackend::start("away-v1").await;
    let port = free_port();
    let host = fqdn("away", OTHER_NS);
    mesh.write("other-namespace.yaml", &workloads::namespace(OTHER_NS));
    mesh.write("root-namespace.yaml", &workloads::namespace("istio-system"));
    mesh.write(
        "other/away.yaml",
        &workloads::service(OTHER_NS, "away", "http", port, &[away.workload("v1")]),
    );
    mesh.eventually("away served", async || {
        mesh.get(port, &host, "/").await?.served_by().map(|_| ())
    })
    .await;
    let hidden = async || match mesh.get(port, &host, "/").await {
        Err(_no_answer) => Ok(()),
        Ok(r) => expect(r.backend().is_none(), r),
    };
    mesh.apply(
        "root-sidecar.yaml",
        ROOT_DEFAULT,
        "the root namespace's default hiding other namespaces",
        hidden,
    )
    .await;
    // Selecting other workloads: the client still gets the root default.
    mesh.write("sidecar-other.yaml", &selecting("someone-else"));
    // Selecting the client: it sees every namespace again.
    mesh.apply(
        "sidecar-client.yaml",
        &selecting("client"),
        "the Sidecar selecting the client applied",
        async || mesh.get(port, &host, "/").await?.served_by().map(|_| ()),
    )
    .await;
    mesh.remove("sidecar-client.yaml");
    mesh.eventually(
        "the root default back once the selecting Sidecar is gone",
        async || match mesh.get(port, &host, "/").await {
            Err(_no_answer) => Ok(()),
            Ok(r) => expect(r.backend().is_none(), r),
        },
    )
    .await;
    mesh.finish().await;
}
