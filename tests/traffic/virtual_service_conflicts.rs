//! Two VirtualServices for one host: the oldest (`metadata.creationTimestamp`) wins,
//! as in Istio (`sortConfigByCreationTime`), whichever namespace it is in; without it
//! the other routes.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

/// A VirtualService `name` in `namespace`, created at `created`, sending web's traffic
/// to `target`.
fn virtual_service(namespace: &str, name: &str, created: &str, target: &str) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: {name}
  namespace: {namespace}
  creationTimestamp: "{created}"
spec:
  hosts: [web.traffic.svc.cluster.local]
  http:
  - route: [{{destination: {{host: {target}.traffic.svc.cluster.local}}}}]
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_virtual_services_for_one_host_the_oldest_wins() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let (web, blue, green) = (
        HttpBackend::start("web-v1").await,
        HttpBackend::start("blue-v1").await,
        HttpBackend::start("green-v1").await,
    );
    let port = free_port();
    for (name, backend) in [("web", &web), ("blue", &blue), ("green", &green)] {
        mesh.write(
            &format!("{name}.yaml"),
            &workloads::service(CLIENT_NS, name, "http", port, &[backend.workload("v1")]),
        );
    }
    mesh.write("other-namespace.yaml", &workloads::namespace("other"));
    let host = fqdn("web", CLIENT_NS);
    // The client's own namespace holds the newer one: the older, elsewhere, wins.
    mesh.write(
        "newer.yaml",
        &virtual_service(CLIENT_NS, "a-newer", "2024-05-02T00:00:00Z", "green"),
    );
    mesh.apply(
        "older.yaml",
        &virtual_service("other", "z-older", "2024-05-01T00:00:00Z", "blue"),
        "the older VirtualService routes web",
        async || {
            let r = mesh.get(port, &host, "/").await?;
            expect(r.backend() == Some("blue-v1"), r)
        },
    )
    .await;
    // Without it, the newer one routes.
    mesh.remove("older.yaml");
    mesh.eventually("the newer VirtualService routes web", async || {
        let r = mesh.get(port, &host, "/").await?;
        expect(r.backend() == Some("green-v1"), r)
    })
    .await;
    mesh.finish().await;
}
