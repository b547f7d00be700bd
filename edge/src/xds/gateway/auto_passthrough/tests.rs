use crate::proxy::{InterceptionMode, Proxy, ProxyKind};
use crate::xds::testing::*;
use crate::xds::types::{CLUSTER, ENDPOINT, LISTENER};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::{ClusterLoadAssignment, lb_endpoint};
use envoy_types::pb::envoy::config::listener::v3::{Filter, Listener, filter};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use shoal_proto::config::istio::*;
use shoal_proto::config::security::{AuthorizationPolicy, AuthorizationRule, PolicySelector};
use shoal_proto::model::{Endpoint, NamedConfig, NamespaceConfig};
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::Chunk;

const SNI_REVIEWS: &str = "outbound_.9080_._.reviews.shop.svc.cluster.local";
const SNI_REVIEWS_V1: &str = "outbound_.9080_.v1_.reviews.shop.svc.cluster.local";

fn named<T>(ns: &str, name: &str, spec: T) -> NamedConfig<T> {
    NamedConfig {
        name: name.into(),
        namespace: ns.into(),
        created: 0,
        spec,
    }
}

fn server(number: u32, protocol: &str, mode: &str, hosts: &[&str]) -> GatewayServer {
    GatewayServer {
        port: Some(GatewayPort {
            number,
            protocol: protocol.into(),
            name: format!("tls-{number}"),
            target_port: None,
        }),
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        tls: Some(ServerTlsSettings {
            mode: mode.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The test mesh with reviews on two networks (sidecars on both), an east-west Gateway
/// (15443 AUTO_PASSTHROUGH `hosts`) in istio-system, and `extra` there too.
fn eastwest_mesh(hosts: &[&str], extra: impl FnOnce(&mut NamespaceConfig)) -> PushContext {
    let mut system = NamespaceConfig {
        namespace: "istio-system".into(),
        gateways: vec![named(
            "istio-system",
            "eastwest",
            Gateway {
                selector: labels(&[("istio", "eastwestgateway")]),
                servers: vec![server(15443, "TLS", "AUTO_PASSTHROUGH", hosts)],
            },
        )],
        ..Default::default()
    };
    extra(&mut system);
    let on = |ip: &str, version: &str, network: &str| {
        let mut ep = Endpoint {
            network: network.into(),
            ..endpoint(ip, 9080, version, "", true)
        };
        ep.labels
            .insert("security.istio.io/tlsMode".into(), "istio".into());
        ep
    };
    let mut eps = reviews_endpoints();
    eps.endpoints = vec![
        on("10.1.0.1", "v1", "net-1"),
        on("10.2.0.1", "v1", "net-2"),
        on("10.2.0.2", "v2", "net-2"),
    ];
    let mut chunks: Vec<Chunk> = mesh()
        .namespaces()
        .values()
        .map(|ns| Chunk::Namespace((**ns).clone()))
        .collect();
    chunks.push(Chunk::Namespace(system));
    chunks.push(Chunk::Endpoints(eps));
    PushContext::from_chunks(2, chunks)
}

fn eastwest_gateway() -> Proxy {
    Proxy {
        id: "router~10.2.9.9~eastwest-1.istio-system~istio-system.svc.cluster.local".into(),
        kind: ProxyKind::Router,
        labels: labels(&[("istio", "eastwestgateway")]),
        network: "net-2".into(),
        ..proxy("istio-system", "10.2.9.9", InterceptionMode::None)
    }
}

fn tcp_proxy_cluster(filter: &Filter) -> String {
    let Some(filter::ConfigType::TypedConfig(any)) = &filter.config_type else {
        panic!("no typed config")
    };
    let proxy: TcpProxy = unpack(any);
    match proxy.cluster_specifier {
        Some(tcp_proxy::ClusterSpecifier::Cluster(c)) => c,
        other => panic!("not one cluster: {other:?}"),
    }
}

#[test]
fn auto_passthrough_forwards_each_mesh_service_port_and_subset_by_its_sni() {
    let push = eastwest_mesh(&["*.local"], |_| {});
    let listeners: Vec<Listener> = generate(LISTENER, &eastwest_gateway(), &push, &[]);
    let [listener] = listeners.as_slice() else {
        panic!("one listener: {listeners:?}")
    };
    assert_eq!(listener.name, "0.0.0.0_15443");
    assert_eq!(
        listener.listener_filters[0].name,
        "envoy.filters.listener.tls_inspector"
    );
    let names: Vec<&str> = listener
        .filter_chains
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    // Every Kubernetes service's proxied ports, and reviews' subsets; not the
    // mesh-external api.example.com, nor the passthrough (headless) cache.
    assert_eq!(
        names,
        [
            "outbound_.5432_._.db.shop.svc.cluster.local",
            "outbound_.80_._.web.other.svc.cluster.local",
            "outbound_.9080_._.ratings.shop.svc.cluster.local",
            SNI_REVIEWS,
            SNI_REVIEWS_V1,
            "outbound_.9080_.v2_.reviews.shop.svc.cluster.local",
            "outbound_.9090_._.ratings.shop.svc.cluster.local",
        ]
    );
    for chain in &listener.filter_chains {
        let m = chain.filter_chain_match.as_ref().unwrap();
        assert_eq!(m.server_names, std::slice::from_ref(&chain.name));
        assert_eq!(m.transport_protocol, "tls");
        for alpn in ["istio", "istio-peer-exchange", "istio-http/1.1", "istio-h2"] {
            assert!(m.application_protocols.iter().any(|a| a == alpn), "{alpn}");
        }
        // No TLS of its own, and straight to the cluster of the same name.
        assert!(chain.transport_socket.is_none());
        assert_eq!(chain.filters.len(), 1);
        assert_eq!(tcp_proxy_cluster(&chain.filters[0]), chain.name);
    }
}

#[test]
fn authorization_policies_do_not_guard_the_forwarded_mtls() {
    let deny_all = |ns: &mut NamespaceConfig| {
        ns.authorization_policies.push(named(
            "istio-system",
            "deny",
            AuthorizationPolicy {
                selector: Some(PolicySelector {
                    match_labels: labels(&[("istio", "eastwestgateway")]),
                }),
                action: Some("DENY".into()),
                rules: vec![AuthorizationRule::default()],
                ..Default::default()
            },
        ));
    };
    let push = eastwest_mesh(&["*.local"], deny_all);
    let listeners: Vec<Listener> = generate(LISTENER, &eastwest_gateway(), &push, &[]);
    let filters: Vec<&str> = listeners[0]
        .filter_chains
        .iter()
        .flat_map(|c| c.filters.iter().map(|f| f.name.as_str()))
        .collect();
    assert!(
        filters
            .iter()
            .all(|f| *f == "envoy.filters.network.tcp_proxy"),
        "{filters:?}"
    );
}

#[test]
fn server_hosts_narrow_the_services_forwarded() {
    let push = eastwest_mesh(&["*.other.svc.cluster.local"], |_| {});
    let listeners: Vec<Listener> = generate(LISTENER, &eastwest_gateway(), &push, &[]);
    let names: Vec<&str> = listeners[0]
        .filter_chains
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["outbound_.80_._.web.other.svc.cluster.local"]);
    let clusters: Vec<Cluster> = generate(CLUSTER, &eastwest_gateway(), &push, &[]);
    let sni: Vec<&str> = clusters
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| n.starts_with("outbound_."))
        .collect();
    assert_eq!(sni, names);
}

#[test]
fn sni_dnat_clusters_sit_beside_the_sidecar_clusters_without_tls() {
    let push = eastwest_mesh(&["*.local"], |_| {});
    let clusters: Vec<Cluster> = generate(CLUSTER, &eastwest_gateway(), &push, &[]);
    let names: Vec<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
    assert!(names.is_sorted(), "{names:?}");
    assert!(names.contains(&"outbound|9080||reviews.shop.svc.cluster.local"));
    let reviews = clusters.iter().find(|c| c.name == SNI_REVIEWS).unwrap();
    assert!(reviews.transport_socket.is_none());
    assert!(reviews.transport_socket_matches.is_empty());
    let eds = reviews.eds_cluster_config.as_ref().unwrap();
    assert_eq!(eds.service_name, SNI_REVIEWS);
    // The DestinationRule's policy but its TLS: reviews' outlier detection.
    assert!(reviews.outlier_detection.is_some());
    // Asked by name, in the order asked, with the sidecar's.
    let some: Vec<Cluster> = generate(
        CLUSTER,
        &eastwest_gateway(),
        &push,
        &[SNI_REVIEWS_V1, "BlackHoleCluster", "nope"],
    );
    let some: Vec<&str> = some.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(some, [SNI_REVIEWS_V1, "BlackHoleCluster"]);
}

fn hosts(la: &ClusterLoadAssignment) -> Vec<String> {
    let mut out: Vec<String> = la
        .endpoints
        .iter()
        .flat_map(|g| g.lb_endpoints.iter())
        .map(|e| {
            let Some(lb_endpoint::HostIdentifier::Endpoint(ep)) = &e.host_identifier else {
                panic!("no endpoint")
            };
            format!("{:?}", ep.address)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn sni_dnat_endpoints_are_the_gateways_own_network_only() {
    let push = eastwest_mesh(&["*.local"], |_| {});
    let assignments: Vec<ClusterLoadAssignment> = generate(
        ENDPOINT,
        &eastwest_gateway(),
        &push,
        &[SNI_REVIEWS, SNI_REVIEWS_V1],
    );
    let [all, v1] = assignments.as_slice() else {
        panic!("two assignments: {assignments:?}")
    };
    assert_eq!(all.cluster_name, SNI_REVIEWS);
    let all = hosts(all);
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all.iter().all(|h| h.contains("10.2.0.")), "{all:?}");
    let v1 = hosts(v1);
    assert_eq!(v1.len(), 1);
    assert!(v1[0].contains("10.2.0.1"), "{v1:?}");
    // A wildcard request has the sidecar's assignments too, sorted.
    let every: Vec<ClusterLoadAssignment> = generate(ENDPOINT, &eastwest_gateway(), &push, &[]);
    let names: Vec<&str> = every.iter().map(|a| a.cluster_name.as_str()).collect();
    assert!(names.is_sorted(), "{names:?}");
    assert!(names.contains(&SNI_REVIEWS));
    assert!(names.contains(&"outbound|9080||reviews.shop.svc.cluster.local"));
}

#[test]
fn a_router_without_auto_passthrough_gets_no_sni_dnat_clusters() {
    let push = eastwest_mesh(&["*.local"], |_| {});
    let mut ingress = eastwest_gateway();
    ingress.labels = labels(&[("istio", "ingressgateway")]);
    let clusters: Vec<Cluster> = generate(CLUSTER, &ingress, &push, &[]);
    assert!(
        clusters.iter().all(|c| !c.name.starts_with("outbound_.")),
        "{:?}",
        clusters.iter().map(|c| &c.name).collect::<Vec<_>>()
    );
}
