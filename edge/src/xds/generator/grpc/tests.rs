use super::super::super::testing::*;
use super::super::Generator;
use crate::proxy::{InterceptionMode, Proxy, ProxyKind};
use crate::xds::routes::FAULT_FILTER;
use crate::xds::types;
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, route, route_action};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};
use std::sync::Arc;

const REVIEWS_ROUTE: &str = "outbound|9080||reviews.shop.svc.cluster.local";

fn client(ns: &str, ip: &str) -> Proxy {
    Proxy {
        kind: ProxyKind::ProxylessGrpc,
        ..proxy(ns, ip, InterceptionMode::Redirect)
    }
}

fn hcm(l: &Listener) -> HttpConnectionManager {
    unpack(
        l.api_listener
            .as_ref()
            .and_then(|a| a.api_listener.as_ref())
            .expect("api_listener"),
    )
}

fn rds_name(l: &Listener) -> String {
    match hcm(l).route_specifier {
        Some(http_connection_manager::RouteSpecifier::Rds(rds)) => rds.route_config_name,
        other => panic!("{}: not RDS: {other:?}", l.name),
    }
}

#[test]
fn listeners_are_the_targets_asked_for() {
    let push = mesh();
    let names = [
        "reviews:9080",
        "reviews.shop:9080",
        "reviews.shop.svc:9080",
        "ratings.shop.svc.cluster.local:9090",
        "web.other.svc.cluster.local:80",
        // Short names expand in the client's namespace only; unknown ports and server
        // listeners give nothing.
        "web:80",
        "web.other:80",
        "reviews:1234",
        "reviews",
        "xds.istio.io/grpc/lds/inbound/0.0.0.0:9080",
    ];
    let got: Vec<Listener> = generate(types::LISTENER, &client("shop", "10.1.0.7"), &push, &names);
    let got_names: Vec<&str> = got.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(got_names, &names[..5]);
    for l in &got[..3] {
        assert_eq!(rds_name(l), REVIEWS_ROUTE);
        assert!(l.filter_chains.is_empty(), "{}: api listener only", l.name);
    }
    assert_eq!(
        rds_name(&got[3]),
        "outbound|9090||ratings.shop.svc.cluster.local"
    );
    let filters: Vec<String> = hcm(&got[0])
        .http_filters
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(filters, [FAULT_FILTER, "envoy.filters.http.router"]);
    let addr = format!("{:?}", got[0].address);
    assert!(
        addr.contains("10.96.0.10") && addr.contains("9080"),
        "{addr}"
    );
}

#[test]
fn wildcard_listeners_are_every_service_port_by_fqdn() {
    let got: Vec<Listener> = generate(types::LISTENER, &client("shop", "10.1.0.7"), &mesh(), &[]);
    let names: Vec<&str> = got.iter().map(|l| l.name.as_str()).collect();
    assert!(names.is_sorted(), "{names:?}");
    for want in [
        "reviews.shop.svc.cluster.local:9080",
        "ratings.shop.svc.cluster.local:9090",
        "web.other.svc.cluster.local:80",
        "api.example.com:443",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
}

#[test]
fn routes_are_one_virtual_host_with_the_virtual_service_routes() {
    let push = mesh();
    let p = client("shop", "10.1.0.7");
    let names = [
        REVIEWS_ROUTE,
        "outbound|9080||nothing.shop.svc.cluster.local",
        "9080",
    ];
    let got: Vec<RouteConfiguration> = generate(types::ROUTE, &p, &push, &names);
    assert_eq!(got.len(), 1);
    let config = &got[0];
    assert_eq!(config.name, REVIEWS_ROUTE);
    let [vhost] = config.virtual_hosts.as_slice() else {
        panic!("one virtual host: {:?}", config.virtual_hosts);
    };
    // The authorities a channel's target may carry.
    for d in [
        "reviews.shop.svc.cluster.local:9080",
        "reviews:9080",
        "reviews.shop:9080",
        "10.96.0.10:9080",
    ] {
        assert!(
            vhost.domains.iter().any(|x| x == d),
            "{d} in {:?}",
            vhost.domains
        );
    }
    let route = |name: &str| {
        vhost
            .routes
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("route {name}"))
    };
    let action = |name: &str| match &route(name).action {
        Some(route::Action::Route(a)) => a.clone(),
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(
        action("jason").cluster_specifier,
        Some(route_action::ClusterSpecifier::Cluster(
            "outbound|9080|v2|reviews.shop.svc.cluster.local".into()
        ))
    );
    // The timeout is gRPC's max stream duration; retries stay.
    let api = action("api");
    assert_eq!(api.timeout.map(|t| t.seconds), Some(5));
    assert_eq!(
        api.max_stream_duration
            .and_then(|m| m.max_stream_duration)
            .map(|d| d.seconds),
        Some(5)
    );
    assert_eq!(
        api.retry_policy
            .and_then(|r| r.num_retries)
            .map(|n| n.value),
        Some(3)
    );
    match action("split").cluster_specifier {
        Some(route_action::ClusterSpecifier::WeightedClusters(w)) => {
            let weights: Vec<(String, u32)> = w
                .clusters
                .into_iter()
                .map(|c| (c.name, c.weight.map_or(0, |w| w.value)))
                .collect();
            assert_eq!(
                weights,
                [
                    (
                        "outbound|9080|v1|reviews.shop.svc.cluster.local".to_string(),
                        80
                    ),
                    (
                        "outbound|9080|v2|reviews.shop.svc.cluster.local".to_string(),
                        20
                    )
                ]
            );
        }
        other => panic!("split: {other:?}"),
    }
    // gRPC rejects per-route configuration of filters it lacks (CORS); fault stays.
    let filters: Vec<&String> = route("features").typed_per_filter_config.keys().collect();
    assert_eq!(filters, [FAULT_FILTER]);

    // Routes exist only by name for gRPC.
    let none: Vec<RouteConfiguration> = generate(types::ROUTE, &p, &push, &[]);
    assert!(none.is_empty());
}

#[test]
fn clusters_are_the_named_eds_clusters_with_the_policies_grpc_has() {
    let push = mesh();
    let p = client("shop", "10.1.0.7");
    let names = [
        "outbound|9080||reviews.shop.svc.cluster.local",
        "outbound|9080|v1|reviews.shop.svc.cluster.local",
        "outbound|9080|v2|reviews.shop.svc.cluster.local",
        "outbound|9090||ratings.shop.svc.cluster.local",
        // No such subset, port or service; and a DNS service, which gRPC gets no EDS for.
        "outbound|9080|v9|reviews.shop.svc.cluster.local",
        "outbound|1|v1|reviews.shop.svc.cluster.local",
        "outbound|80||nothing.shop.svc.cluster.local",
        "outbound|80||api.example.com",
    ];
    let got: Vec<Cluster> = generate(types::CLUSTER, &p, &push, &names);
    let got_names: Vec<&str> = got.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(got_names, &names[..4]);
    use cluster::LbPolicy;
    let policies: Vec<i32> = got.iter().map(|c| c.lb_policy).collect();
    assert_eq!(
        policies,
        [
            LbPolicy::LeastRequest as i32,
            LbPolicy::LeastRequest as i32,
            LbPolicy::RoundRobin as i32,
            LbPolicy::RingHash as i32
        ]
    );
    for c in &got {
        assert_eq!(
            c.cluster_discovery_type,
            Some(cluster::ClusterDiscoveryType::Type(
                cluster::DiscoveryType::Eds as i32
            ))
        );
        let eds = c.eds_cluster_config.as_ref().expect("eds config");
        assert_eq!(eds.service_name, c.name);
        assert!(c.transport_socket.is_none() && c.outlier_detection.is_none());
    }
    // http2MaxRequests is the one circuit breaker gRPC has.
    let thresholds = &got[0].circuit_breakers.as_ref().expect("limits").thresholds[0];
    assert_eq!(thresholds.max_requests.map(|v| v.value), Some(200));
    assert!(thresholds.max_connections.is_none());
    match &got[3].lb_config {
        Some(cluster::LbConfig::RingHashLbConfig(r)) => {
            assert_eq!(r.minimum_ring_size.map(|v| v.value), Some(1024))
        }
        other => panic!("ring hash config: {other:?}"),
    }

    let none: Vec<Cluster> = generate(types::CLUSTER, &p, &push, &[]);
    assert!(none.is_empty(), "clusters exist only by name for gRPC");
}

#[test]
fn endpoints_are_the_sidecars_and_answers_are_shared() {
    let push = mesh();
    let g = Generator::new();
    let (a, b) = (client("shop", "10.1.0.7"), client("shop", "10.1.0.8"));
    let sidecar = proxy("shop", "10.1.0.9", InterceptionMode::Redirect);
    let v1 = ["outbound|9080|v1|reviews.shop.svc.cluster.local".to_string()];
    let eds = g.generate(types::ENDPOINT, &a, &push, &v1).unwrap();
    let sidecar_eds = g.generate(types::ENDPOINT, &sidecar, &push, &v1).unwrap();
    assert_eq!(eds.len(), 1);
    assert!(Arc::ptr_eq(&eds[0], &sidecar_eds[0]));

    let targets = ["reviews:9080".to_string()];
    let la = g.generate(types::LISTENER, &a, &push, &targets).unwrap();
    let lb = g.generate(types::LISTENER, &b, &push, &targets).unwrap();
    assert!(Arc::ptr_eq(&la[0], &lb[0]));
    let routes = [REVIEWS_ROUTE.to_string()];
    let ra = g.generate(types::ROUTE, &a, &push, &routes).unwrap();
    let rb = g.generate(types::ROUTE, &b, &push, &routes).unwrap();
    assert!(Arc::ptr_eq(&ra[0], &rb[0]));
    let ca = g.generate(types::CLUSTER, &a, &push, &v1).unwrap();
    let cb = g.generate(types::CLUSTER, &b, &push, &v1).unwrap();
    assert!(Arc::ptr_eq(&ca[0], &cb[0]));
    let s = g.cache_stats();
    assert_eq!((s.listeners.hits, s.listeners.misses), (1, 1));
    assert_eq!((s.routes.hits, s.routes.misses), (1, 1));
}
