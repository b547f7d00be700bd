use super::*;
use shoal_proto::config::Spec;
use shoal_proto::config::parse::parse_documents;
use shoal_proto::model::{Protocol, Resolution};

fn configs(cluster: &str, yaml: &str) -> Vec<Config> {
    parse_documents("test.yaml", yaml)
        .into_iter()
        .map(|r| {
            let mut c = r.expect("valid test yaml").config;
            c.meta.origin.cluster = cluster.into();
            c
        })
        .collect()
}

fn build(ns: &str, configs: &[Config]) -> NamespaceBuild {
    let mut objects = NamespaceObjects::default();
    for c in configs.iter().filter(|c| c.meta.namespace == ns) {
        objects.push(c);
    }
    build_namespace(ns, &objects)
}

const SERVICE_WITH_SLICE: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec:
  clusterIP: 10.0.0.10
  selector: {app: reviews}
  ports:
  - {name: http, port: 9080, targetPort: 8080}
---
apiVersion: v1
kind: Pod
metadata: {name: reviews-v1, namespace: shop, labels: {app: reviews, version: v1}}
spec: {serviceAccountName: reviews}
status: {podIP: 10.1.0.1}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: reviews-abc
  namespace: shop
  labels: {kubernetes.io/service-name: reviews}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- addresses: [10.1.0.1]
  conditions: {ready: true}
  targetRef: {kind: Pod, name: reviews-v1}
  zone: us-east-1a
- addresses: [10.1.0.2]
  conditions: {ready: false}
"#;

#[test]
fn service_and_endpoints_from_slices_with_pod_labels() {
    let cs = configs("c1", SERVICE_WITH_SLICE);
    let b = build("shop", &cs);
    assert_eq!(b.config.services.len(), 1);
    let svc = &b.config.services[0];
    assert_eq!(svc.hostname, "reviews.shop.svc.cluster.local");
    assert_eq!(svc.ports[0].protocol, Protocol::Http);
    assert_eq!(svc.resolution, Resolution::ClientSideLb);
    assert_eq!(svc.addresses, ["10.0.0.10"]);
    let eps = &b.endpoints[0].endpoints;
    assert_eq!(eps.len(), 2);
    assert_eq!(eps[0].address, "10.1.0.1");
    assert_eq!(eps[0].port, 8080);
    assert_eq!(eps[0].service_port, 9080);
    assert_eq!(eps[0].labels.get("version").map(String::as_str), Some("v1"));
    assert_eq!(eps[0].service_account, "reviews");
    // No region label: Istio writes the empty region too.
    assert_eq!(eps[0].locality, "/us-east-1a");
    assert!(eps[0].healthy);
    assert!(!eps[1].healthy);
}

/// The Node's locality (which the Kubernetes registry writes onto the Pod) wins over
/// the slice's zone; the Pod's `istio-locality` label wins over both.
#[test]
fn endpoint_locality_from_the_node_then_the_label() {
    let mut cs = configs("c1", SERVICE_WITH_SLICE);
    let pod = cs.iter_mut().find(|c| c.kind() == Kind::Pod).unwrap();
    if let Spec::Pod(p) = &mut pod.spec {
        p.node_locality = "us-east-1/us-east-1a".into();
    }
    assert_eq!(
        build("shop", &cs).endpoints[0].endpoints[0].locality,
        "us-east-1/us-east-1a"
    );
    let pod = cs.iter_mut().find(|c| c.kind() == Kind::Pod).unwrap();
    pod.meta
        .labels
        .insert("istio-locality".into(), "eu.west.a".into());
    assert_eq!(
        build("shop", &cs).endpoints[0].endpoints[0].locality,
        "eu/west/a"
    );
}

#[test]
fn pods_selected_when_no_endpoint_objects() {
    let yaml = r#"
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: web-port}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: shop, labels: {app: web}}
spec:
  containers: [{name: c, ports: [{name: web-port, containerPort: 8081}]}]
status: {podIP: 127.0.0.5}
---
apiVersion: v1
kind: Pod
metadata: {name: other, namespace: shop, labels: {app: other}}
status: {podIP: 127.0.0.6}
"#;
    let b = build("shop", &configs("c1", yaml));
    let eps = &b.endpoints[0].endpoints;
    assert_eq!(eps.len(), 1);
    assert_eq!((eps[0].address.as_str(), eps[0].port), ("127.0.0.5", 8081));
}

#[test]
fn services_merge_across_clusters() {
    let mut cs = configs("c1", SERVICE_WITH_SLICE);
    let mut c2 = configs("c2", SERVICE_WITH_SLICE);
    for c in &mut c2 {
        if let Spec::EndpointSlice(s) = &mut c.spec {
            s.endpoints[0].addresses = vec!["10.2.0.1".into()];
            s.endpoints.truncate(1);
        }
    }
    cs.extend(c2);
    let b = build("shop", &cs);
    assert_eq!(b.config.services.len(), 1);
    assert_eq!(b.config.services[0].clusters, ["c1", "c2"]);
    let clusters: Vec<_> = b.endpoints[0]
        .endpoints
        .iter()
        .map(|e| e.cluster.as_str())
        .collect();
    assert_eq!(clusters, ["c1", "c1", "c2"]);
}

#[test]
fn service_entry_with_workload_entries() {
    let yaml = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vms, namespace: shop}
spec:
  hosts: [vm.example.com]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 8080}]
  workloadSelector: {labels: {app: vm}}
---
apiVersion: networking.istio.io/v1beta1
kind: WorkloadEntry
metadata: {name: vm-1, namespace: shop}
spec: {address: 10.9.0.1, labels: {app: vm}, locality: eu/west, weight: 3}
"#;
    let b = build("shop", &configs("c1", yaml));
    let svc = &b.config.services[0];
    assert_eq!(svc.hostname, "vm.example.com");
    assert!(!svc.mesh_external);
    let ep = &b.endpoints[0].endpoints[0];
    assert_eq!(
        (ep.address.as_str(), ep.port, ep.weight),
        ("10.9.0.1", 8080, 3)
    );
    assert_eq!(ep.locality, "eu/west");
}

#[test]
fn routing_short_names_resolved_and_dangling_subset_reported() {
    let yaml = r#"
apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v3}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: shop}
spec:
  host: reviews
  subsets: [{name: v1, labels: {version: v1}}]
"#;
    let b = build("shop", &configs("c1", yaml));
    let vs = &b.config.virtual_services[0].spec;
    assert_eq!(vs.hosts, ["reviews.shop.svc.cluster.local"]);
    assert_eq!(
        vs.http[0].route[0].destination.host,
        "reviews.shop.svc.cluster.local"
    );
    assert_eq!(
        b.config.destination_rules[0].spec.host,
        "reviews.shop.svc.cluster.local"
    );
    let warnings = dangling_subsets(std::iter::once(&b.config));
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("\"v3\""), "{warnings:?}");
}

#[test]
fn dangling_subsets_match_wildcard_destination_rule_hosts() {
    let yaml = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}
      weight: 50
    - destination: {host: reviews, subset: v2}
      weight: 25
    - destination: {host: ratings, subset: v1}
      weight: 25
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: all, namespace: shop}
spec:
  host: "*.shop.svc.cluster.local"
  subsets: [{name: v1, labels: {version: v1}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ratings, namespace: shop}
spec:
  host: ratings
  subsets: [{name: v2, labels: {version: v2}}]
"#;
    let b = build("shop", &configs("c1", yaml));
    let warnings = dangling_subsets(std::iter::once(&b.config));
    // v1 of both hosts is defined by the wildcard rule; v2 of reviews by nothing.
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("\"v2\" of reviews.shop"),
        "{warnings:?}"
    );
}

/// An east-west gateway Service (labelled with its network) becomes the network's
/// gateway at its load balancer address and port 15443 (or the labelled port); one
/// without an address yet is not a gateway.
#[test]
fn network_gateways_from_labelled_services() {
    let cs = configs(
        "c2",
        r#"
apiVersion: v1
kind: Service
metadata:
  name: istio-eastwestgateway
  namespace: istio-system
  labels: {topology.istio.io/network: net-2}
spec:
  type: LoadBalancer
  ports: [{name: tls, port: 15443}]
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.10}]
---
apiVersion: v1
kind: Service
metadata:
  name: other-gateway
  namespace: istio-system
  labels: {topology.istio.io/network: net-3, networking.istio.io/gatewayPort: "16443"}
spec:
  externalIPs: [192.0.2.20]
---
apiVersion: v1
kind: Service
metadata:
  name: pending
  namespace: istio-system
  labels: {topology.istio.io/network: net-4}
spec: {type: LoadBalancer}
"#,
    );
    let gateways: Vec<_> = build("istio-system", &cs)
        .config
        .network_gateways
        .into_iter()
        .map(|g| (g.network, g.address, g.port, g.cluster))
        .collect();
    let s = |v: &str| v.to_string();
    assert_eq!(
        gateways,
        [
            (s("net-2"), s("192.0.2.10"), 15443, s("c2")),
            (s("net-3"), s("192.0.2.20"), 16443, s("c2")),
        ]
    );
}

/// A ServiceEntry port's `protocol` decides, not its name; `DNS_ROUND_ROBIN` stays
/// distinct from `DNS`; an ExternalName Service keeps the name it aliases.
#[test]
fn entry_port_protocols_dns_round_robin_and_external_names() {
    let yaml = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: shop}
spec:
  hosts: [db.example.com]
  resolution: DNS_ROUND_ROBIN
  ports: [{number: 80, name: http-looking, protocol: TCP}]
---
apiVersion: v1
kind: Service
metadata: {name: legacy, namespace: shop}
spec:
  type: ExternalName
  externalName: legacy.example.org
  ports: [{name: http, port: 80}]
"#;
    let b = build("shop", &configs("c1", yaml));
    let find = |host: &str| {
        b.config
            .services
            .iter()
            .find(|s| s.hostname == host)
            .unwrap()
    };
    let db = find("db.example.com");
    assert_eq!(db.ports[0].protocol, Protocol::Tcp);
    assert_eq!(db.resolution, Resolution::DnsRoundRobin);
    let legacy = find("legacy.shop.svc.cluster.local");
    assert_eq!(legacy.resolution, Resolution::Dns);
    assert_eq!(legacy.external_name, "legacy.example.org");
}

#[test]
fn the_mesh_config_travels_in_its_namespace_chunk() {
    let cs = configs(
        "c1",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: 'rootNamespace: mesh-root'\n",
    );
    let built = build("istio-system", &cs);
    let [mesh] = built.config.mesh_configs.as_slice() else {
        panic!("one mesh config: {:?}", built.config.mesh_configs);
    };
    assert_eq!(
        (mesh.namespace.as_str(), mesh.name.as_str()),
        ("istio-system", "istio")
    );
    assert_eq!(mesh.spec.root_namespace(), "mesh-root");
    // The routing-only rebuild (a mesh config change alone) carries it too.
    let mut objects = NamespaceObjects::default();
    cs.iter().for_each(|c| objects.push(c));
    assert_eq!(
        build_routing("istio-system", &objects).mesh_configs,
        built.config.mesh_configs
    );
    assert_eq!(Feeds::of(Kind::MeshConfig), Feeds::Routing);
}
