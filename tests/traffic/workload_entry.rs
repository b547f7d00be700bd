//! A Kubernetes Service whose selector picks a WorkloadEntry as well as its Pod: traffic
//! reaches both the EndpointSlice's backend and the VM's, as in Istio (the entry is not
//! dropped because the Service has EndpointSlices).
//!
//! The entry names its WorkloadGroup by ownerReference and inherits from it the label the
//! Service selects and the port, named as the service port, that its backend listens on.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use std::collections::BTreeSet;

fn vm_group_and_entry(vm_port: u16) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata:
  name: carts-vms
  namespace: traffic
spec:
  metadata:
    labels: {{app: carts, version: vm}}
  template:
    ports: {{http: {vm_port}}}
    serviceAccount: carts-vm
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata:
  name: carts-vm-1
  namespace: traffic
  ownerReferences:
  - {{apiVersion: networking.istio.io/v1, kind: WorkloadGroup, name: carts-vms, uid: vm-1}}
spec:
  address: 127.0.0.1
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_reaches_its_pods_and_the_workload_entries_it_selects() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let pod = HttpBackend::start("carts-pod").await;
    let vm = HttpBackend::start("carts-vm").await;
    let port = free_port();
    let host = fqdn("carts", CLIENT_NS);
    mesh.write(
        "carts.yaml",
        &workloads::service(CLIENT_NS, "carts", "http", port, &[pod.workload("v1")]),
    );
    mesh.eventually("the Pod's backend", async || {
        let reply = mesh.get(port, &host, "/").await?;
        expect(reply.served_by()? == "carts-pod", &reply)
    })
    .await;
    mesh.apply(
        "carts-vm.yaml",
        &vm_group_and_entry(vm.port()),
        "both the Pod's and the WorkloadEntry's backends",
        async || {
            let mut seen = BTreeSet::new();
            for _ in 0..20 {
                let reply = mesh.get(port, &host, "/").await?;
                seen.insert(reply.served_by()?.to_string());
            }
            expect(seen.len() == 2, format!("served by {seen:?}"))
        },
    )
    .await;
    mesh.finish().await;
}
