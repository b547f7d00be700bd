//! Names that are no service of their own, routed as istiod routes them: the second
//! host of a multi-host VirtualService that no service has (Istio's
//! `separateVSHostsAndServices`: it gets a virtual host on the ports of the services the
//! VirtualService names), and an ExternalName Service naming a service of the mesh
//! (Istio's alias: a call to its name takes the aliased service's virtual host).

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

const VIRTUAL_SERVICE: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: web
  namespace: traffic
spec:
  hosts: [web, web.example.com]
  http:
  - route: [{destination: {host: web}}]
"#;

/// `legacy` aliases `web` (ExternalName, as `kubectl create service externalname`).
const EXTERNAL_NAME: &str = r#"apiVersion: v1
kind: Service
metadata:
  name: legacy
  namespace: traffic
spec:
  type: ExternalName
  externalName: web.traffic.svc.cluster.local
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_virtual_service_host_and_an_external_name_without_a_service_are_routed() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
    let web = HttpBackend::start("web-v1").await;
    let port = free_port();
    mesh.write(
        "web.yaml",
        &workloads::service(CLIENT_NS, "web", "http", port, &[web.workload("v1")]),
    );
    mesh.apply(
        "web-vs.yaml",
        VIRTUAL_SERVICE,
        "web.example.com routed by web's VirtualService",
        async || {
            let r = mesh.get(port, "web.example.com", "/").await?;
            expect(r.backend() == Some("web-v1"), r)
        },
    )
    .await;
    mesh.apply(
        "legacy.yaml",
        EXTERNAL_NAME,
        "the ExternalName legacy routed as web",
        async || {
            let r = mesh.get(port, &fqdn("legacy", CLIENT_NS), "/").await?;
            expect(r.backend() == Some("web-v1"), r)
        },
    )
    .await;
    // Its short name too, from its own namespace.
    let r = mesh.must_get(port, "legacy", "/").await;
    assert_eq!(r.served_by(), Ok("web-v1"), "{r}");
    mesh.finish().await;
}
