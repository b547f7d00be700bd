//! DestinationRules with a `workloadSelector`: a rule selecting the client's labels
//! (`app: client`) applies to it instead of the namespace-wide rule; once its selector
//! no longer matches, the namespace-wide rule applies again.
//!
//! Both rules define subset `stable`, to different versions, and a VirtualService sends
//! everything to `stable`: the version that answers shows which rule the sidecar has.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

const VIRTUAL_SERVICE: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: carts
  namespace: traffic
spec:
  hosts: [carts]
  http:
  - route:
    - destination: {host: carts, subset: stable}
"#;

const NAMESPACE_WIDE: &str = r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: carts-everyone
  namespace: traffic
spec:
  host: carts
  subsets:
  - {name: stable, labels: {version: v1}}
"#;

fn selecting(app: &str) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: carts-selected
  namespace: traffic
spec:
  host: carts
  workloadSelector:
    matchLabels: {{app: {app}}}
  subsets:
  - {{name: stable, labels: {{version: v2}}}}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selecting_rule_applies_to_its_workloads_only() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
    let v1 = HttpBackend::start("carts-v1").await;
    let v2 = HttpBackend::start("carts-v2").await;
    let port = free_port();
    let host = fqdn("carts", CLIENT_NS);
    mesh.write(
        "carts.yaml",
        &workloads::service(
            CLIENT_NS,
            "carts",
            "http",
            port,
            &[v1.workload("v1"), v2.workload("v2")],
        ),
    );
    mesh.write("carts-routes.yaml", VIRTUAL_SERVICE);
    mesh.write("carts-everyone.yaml", NAMESPACE_WIDE);
    let only = async |backend: &str| {
        for _ in 0..10 {
            let reply = mesh.get(port, &host, "/").await?;
            expect(reply.served_by()? == backend, &reply)?;
        }
        Ok(())
    };
    mesh.eventually("the namespace-wide subset (v1)", async || {
        only("carts-v1").await
    })
    .await;
    mesh.apply(
        "carts-selected.yaml",
        &selecting("client"),
        "the selecting rule's subset (v2)",
        async || only("carts-v2").await,
    )
    .await;
    mesh.apply(
        "carts-selected.yaml",
        &selecting("someone-else"),
        "the namespace-wide subset again",
        async || only("carts-v1").await,
    )
    .await;
    mesh.finish().await;
}
