//! WorkloadEntries and WorkloadGroups as endpoints of Services and ServiceEntries.

use crate::mesh::{NamespaceObjects, build_namespace};
use shoal_proto::config::Config;
use shoal_proto::config::parse::parse_documents;
use shoal_proto::model::Endpoint;

fn configs(yaml: &str) -> Vec<Config> {
    parse_documents("test.yaml", yaml)
        .into_iter()
        .map(|r| {
            let mut c = r.expect("valid test yaml").config;
            c.meta.origin.cluster = "c1".into();
            c
        })
        .collect()
}

/// The endpoints of the namespace's service `hostname`.
fn endpoints(yaml: &str, hostname: &str) -> Vec<Endpoint> {
    let cs = configs(yaml);
    let mut objects = NamespaceObjects::default();
    for c in &cs {
        objects.push(c);
    }
    build_namespace("shop", &objects)
        .endpoints
        .into_iter()
        .find(|e| e.service.hostname == hostname)
        .expect("service built")
        .endpoints
}

fn addresses(eps: &[Endpoint]) -> Vec<(&str, u32, u32)> {
    eps.iter()
        .map(|e| (e.address.as_str(), e.service_port, e.port))
        .collect()
}

const REVIEWS: &str = "reviews.shop.svc.cluster.local";

const SERVICE_WITH_SLICE: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec:
  clusterIP: 10.0.0.10
  selector: {app: reviews}
  ports:
  - {name: http, port: 9080, targetPort: 8080}
  - {name: grpc, port: 9090, targetPort: grpc-port}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: reviews-abc
  namespace: shop
  labels: {kubernetes.io/service-name: reviews}
addressType: IPv4
ports: [{name: http, port: 8080}, {name: grpc, port: 7070}]
endpoints:
- addresses: [10.1.0.1]
  conditions: {ready: true}
"#;

#[test]
fn service_selects_workload_entries_alongside_its_endpoint_slices() {
    let yaml = format!(
        "{SERVICE_WITH_SLICE}---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {{name: vm-1, namespace: shop}}
spec:
  address: 10.9.0.1
  labels: {{app: reviews, version: vm}}
  ports: {{grpc-port: 7171}}
  network: vm-net
  locality: us-east/zone-a
  weight: 4
  serviceAccount: reviews-vm
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {{name: other, namespace: shop}}
spec: {{address: 10.9.0.2, labels: {{app: ratings}}}}
"
    );
    let eps = endpoints(&yaml, REVIEWS);
    assert_eq!(
        addresses(&eps),
        [
            ("10.1.0.1", 9080, 8080),
            ("10.9.0.1", 9080, 8080),
            ("10.1.0.1", 9090, 7070),
            ("10.9.0.1", 9090, 7171),
        ]
    );
    let vm = &eps[1];
    assert_eq!(
        (
            vm.network.as_str(),
            vm.locality.as_str(),
            vm.weight,
            vm.service_account.as_str()
        ),
        ("vm-net", "us-east/zone-a", 4, "reviews-vm")
    );
    assert_eq!(vm.labels["version"], "vm");
}

#[test]
fn named_target_port_the_entry_lacks_gives_no_endpoint_and_service_port_name_maps() {
    let yaml = format!(
        "{SERVICE_WITH_SLICE}---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {{name: vm-1, namespace: shop, labels: {{app: reviews}}}}
spec: {{address: 10.9.0.1, ports: {{http: 18080}}}}
"
    );
    // `http` targets 8080 by number: the entry's port named `http` wins, as in Istio;
    // `grpc` targets the name `grpc-port`, which the entry does not have.
    assert_eq!(
        addresses(&endpoints(&yaml, REVIEWS)),
        [
            ("10.1.0.1", 9080, 8080),
            ("10.9.0.1", 9080, 18080),
            ("10.1.0.1", 9090, 7070)
        ]
    );
}

#[test]
fn identical_endpoints_from_slice_and_entry_are_deduplicated() {
    let yaml = format!(
        "{SERVICE_WITH_SLICE}---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {{name: same-ip, namespace: shop}}
spec: {{address: 10.1.0.1, labels: {{app: reviews}}, ports: {{grpc-port: 7070}}}}
"
    );
    assert_eq!(
        addresses(&endpoints(&yaml, REVIEWS)),
        [("10.1.0.1", 9080, 8080), ("10.1.0.1", 9090, 7070)]
    );
}

#[test]
fn headless_services_do_not_select_workload_entries() {
    let yaml = r#"
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec:
  clusterIP: None
  selector: {app: reviews}
  ports: [{name: http, port: 9080}]
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm-1, namespace: shop}
spec: {address: 10.9.0.1, labels: {app: reviews}}
"#;
    assert!(endpoints(yaml, REVIEWS).is_empty());
}

#[test]
fn service_entry_workload_selector_picks_pods_and_entries() {
    let yaml = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: mixed, namespace: shop}
spec:
  hosts: [mixed.example.com]
  location: MESH_INTERNAL
  resolution: STATIC
  ports:
  - {number: 80, name: http, protocol: HTTP, targetPort: 8080}
  - {number: 90, name: admin, protocol: HTTP}
  workloadSelector: {labels: {app: mixed}}
---
apiVersion: v1
kind: Pod
metadata: {name: mixed-pod, namespace: shop, labels: {app: mixed}}
spec:
  serviceAccountName: mixed
  containers: [{name: app, ports: [{name: admin, containerPort: 9901}]}]
status: {podIP: 10.1.0.5, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: mixed-vm, namespace: shop}
spec: {address: 10.9.0.5, labels: {app: mixed}}
---
apiVersion: v1
kind: Pod
metadata: {name: unrelated, namespace: shop, labels: {app: other}}
status: {podIP: 10.1.0.6}
"#;
    let eps = endpoints(yaml, "mixed.example.com");
    assert_eq!(
        addresses(&eps),
        [
            ("10.1.0.5", 80, 8080),
            ("10.9.0.5", 80, 8080),
            ("10.1.0.5", 90, 9901),
            ("10.9.0.5", 90, 90),
        ]
    );
    assert_eq!(eps[0].service_account, "mixed");
}

const GROUP: &str = r#"
apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: reviews-vms, namespace: shop}
spec:
  metadata:
    labels: {app: reviews, tier: vm}
  template:
    ports: {grpc-port: 7272, http: 18080}
    serviceAccount: reviews-vm
    network: vm-net
    labels: {tier: template, version: v9}
  probe:
    periodSeconds: 5
    httpGet: {path: /ready, port: 18080}
"#;

#[test]
fn entries_naming_their_group_inherit_its_template() {
    let yaml = format!(
        "{SERVICE_WITH_SLICE}---{GROUP}---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata:
  name: by-annotation
  namespace: shop
  annotations: {{istio.io/autoRegistrationGroup: reviews-vms}}
spec: {{address: 10.9.0.1, ports: {{http: 28080}}}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata:
  name: by-owner
  namespace: shop
  ownerReferences:
  - {{apiVersion: networking.istio.io/v1, kind: WorkloadGroup, name: reviews-vms, uid: x}}
spec: {{address: 10.9.0.2, network: own-net, labels: {{version: v2}}}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {{name: no-group, namespace: shop}}
spec: {{address: 10.9.0.3, labels: {{tier: vm}}}}
"
    );
    let eps = endpoints(&yaml, REVIEWS);
    // Only the two entries of the group carry `app: reviews` (from the group's metadata).
    assert_eq!(
        addresses(&eps),
        [
            ("10.1.0.1", 9080, 8080),
            ("10.9.0.1", 9080, 28080),
            ("10.9.0.2", 9080, 18080),
            ("10.1.0.1", 9090, 7070),
            ("10.9.0.1", 9090, 7272),
            ("10.9.0.2", 9090, 7272),
        ]
    );
    let (annotated, owned) = (&eps[1], &eps[2]);
    assert_eq!(annotated.service_account, "reviews-vm");
    assert_eq!(annotated.network, "vm-net");
    assert_eq!(owned.network, "own-net");
    // Template < group metadata < entry.
    assert_eq!(annotated.labels["tier"], "vm");
    assert_eq!(annotated.labels["version"], "v9");
    assert_eq!(owned.labels["version"], "v2");
}
