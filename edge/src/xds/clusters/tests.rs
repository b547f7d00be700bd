use super::super::testing::*;
use super::super::types::CLUSTER;
use super::{
    ClusterDefaults, EndpointFilter, PASSTHROUGH_CLUSTER, blackhole, build, cluster_name,
    inbound_passthrough_cluster, outbound, passthrough,
};
use crate::proxy::InterceptionMode;
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::config_source;
use envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    HttpProtocolOptions, http_protocol_options::UpstreamProtocolOptions,
    http_protocol_options::explicit_http_config::ProtocolConfig,
};
use envoy_types::pb::google::protobuf::Duration;
use prost::Name;
use shoal_proto::push_context::{PushContext, SidecarScope};
use shoal_proto::snapshot::Chunk;
use std::collections::BTreeMap;

fn clusters(mode: InterceptionMode) -> Vec<Cluster> {
    generate(CLUSTER, &proxy("shop", "10.1.0.5", mode), &mesh(), &[])
}

fn find<'a>(cs: &'a [Cluster], name: &str) -> &'a Cluster {
    cs.iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no cluster {name}"))
}

fn kind(c: &Cluster) -> cluster::DiscoveryType {
    match c.cluster_discovery_type {
        Some(cluster::ClusterDiscoveryType::Type(t)) => {
            cluster::DiscoveryType::try_from(t).unwrap()
        }
        _ => panic!("{} has no discovery type", c.name),
    }
}

fn protocol_options(c: &Cluster) -> HttpProtocolOptions {
    unpack(&c.typed_extension_protocol_options[&HttpProtocolOptions::full_name()])
}

fn secs(s: i64) -> Option<Duration> {
    Some(Duration {
        seconds: s,
        nanos: 0,
    })
}

#[test]
fn names_subsets_and_catch_alls() {
    let cs = clusters(InterceptionMode::Redirect);
    let names: Vec<&str> = cs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "BlackHoleCluster",
            "InboundPassthroughCluster",
            "PassthroughCluster",
            "outbound|443||api.example.com",
            "outbound|5432||db.shop.svc.cluster.local",
            "outbound|6379||cache.shop.svc.cluster.local",
            "outbound|80||api.example.com",
            "outbound|80||web.other.svc.cluster.local",
            "outbound|9080|v1|reviews.shop.svc.cluster.local",
            "outbound|9080|v2|reviews.shop.svc.cluster.local",
            "outbound|9080||ratings.shop.svc.cluster.local",
            "outbound|9080||reviews.shop.svc.cluster.local",
            "outbound|9090||ratings.shop.svc.cluster.local",
        ]
    );
    // Without capture there is no virtualInbound, so no cluster for it.
    let none = clusters(InterceptionMode::None);
    assert!(none.iter().all(|c| c.name != "InboundPassthroughCluster"));

    let blackhole = find(&cs, "BlackHoleCluster");
    assert_eq!(kind(blackhole), cluster::DiscoveryType::Static);
    assert!(blackhole.load_assignment.is_none());
    let passthrough = find(&cs, "PassthroughCluster");
    assert_eq!(kind(passthrough), cluster::DiscoveryType::OriginalDst);
    assert_eq!(
        passthrough.lb_policy,
        cluster::LbPolicy::ClusterProvided as i32
    );
}

#[test]
fn eds_cluster_uses_ads_and_its_own_name() {
    let cs = clusters(InterceptionMode::Redirect);
    let c = find(&cs, "outbound|9080|v1|reviews.shop.svc.cluster.local");
    assert_eq!(kind(c), cluster::DiscoveryType::Eds);
    let eds = c.eds_cluster_config.as_ref().unwrap();
    assert_eq!(eds.service_name, c.name);
    let source = eds.eds_config.as_ref().unwrap();
    assert!(matches!(
        source.config_source_specifier,
        Some(config_source::ConfigSourceSpecifier::Ads(_))
    ));
    assert_eq!(source.resource_api_version, 2, "V3");
}

#[test]
fn destination_rule_maps_to_cluster_settings() {
    let cs = clusters(InterceptionMode::Redirect);
    let c = find(&cs, "outbound|9080||reviews.shop.svc.cluster.local");
    assert_eq!(
        c.lb_policy,
        cluster::LbPolicy::LeastRequest as i32,
        "LEAST_CONN"
    );
    assert_eq!(c.connect_timeout, secs(3));
    let t = &c.circuit_breakers.as_ref().unwrap().thresholds[0];
    assert_eq!(t.max_connections.unwrap().value, 100);
    assert_eq!(t.max_pending_requests.unwrap().value, 10);
    assert_eq!(t.max_requests.unwrap().value, 200);
    assert_eq!(t.max_retries.unwrap().value, 5);
    let od = c.outlier_detection.as_ref().unwrap();
    assert_eq!(od.consecutive_5xx.unwrap().value, 7);
    assert_eq!(od.enforcing_consecutive_5xx.unwrap().value, 100);
    assert_eq!(od.enforcing_success_rate.unwrap().value, 0);
    assert_eq!(od.interval, secs(10));
    assert_eq!(od.base_ejection_time, secs(30));
    assert_eq!(od.max_ejection_percent.unwrap().value, 50);
    let opts = protocol_options(c);
    assert_eq!(
        opts.common_http_protocol_options.unwrap().idle_timeout,
        secs(30)
    );
    // An HTTP/1.1 port stays HTTP/1.1.
    assert!(matches!(
        opts.upstream_protocol_options,
        Some(UpstreamProtocolOptions::ExplicitHttpConfig(ref e))
            if matches!(e.protocol_config, Some(ProtocolConfig::HttpProtocolOptions(_)))
    ));

    // The subset overrides the LB and inherits the rest.
    let v2 = find(&cs, "outbound|9080|v2|reviews.shop.svc.cluster.local");
    assert_eq!(v2.lb_policy, cluster::LbPolicy::RoundRobin as i32);
    assert_eq!(v2.connect_timeout, secs(3));
    assert!(v2.outlier_detection.is_some());
}

#[test]
fn defaults_without_destination_rule() {
    let cs = clusters(InterceptionMode::Redirect);
    let c = find(&cs, "outbound|80||web.other.svc.cluster.local");
    assert_eq!(
        c.lb_policy,
        cluster::LbPolicy::LeastRequest as i32,
        "Istio's default"
    );
    assert_eq!(c.connect_timeout, secs(10));
    let t = &c.circuit_breakers.as_ref().unwrap().thresholds[0];
    assert_eq!(t.max_connections.unwrap().value, u32::MAX);
    assert!(c.outlier_detection.is_none());
    assert!(c.typed_extension_protocol_options.is_empty());
}

#[test]
fn consistent_hash_and_http2() {
    let cs = clusters(InterceptionMode::Redirect);
    let c = find(&cs, "outbound|9080||ratings.shop.svc.cluster.local");
    assert_eq!(c.lb_policy, cluster::LbPolicy::RingHash as i32);
    match &c.lb_config {
        Some(cluster::LbConfig::RingHashLbConfig(r)) => {
            assert_eq!(r.minimum_ring_size.unwrap().value, 1024);
        }
        other => panic!("unexpected lb config {other:?}"),
    }
    let grpc = find(&cs, "outbound|9090||ratings.shop.svc.cluster.local");
    assert!(matches!(
        protocol_options(grpc).upstream_protocol_options,
        Some(UpstreamProtocolOptions::ExplicitHttpConfig(ref e))
            if matches!(e.protocol_config, Some(ProtocolConfig::Http2ProtocolOptions(_)))
    ));
}

#[test]
fn dns_and_passthrough_services() {
    let cs = clusters(InterceptionMode::Redirect);
    let api = find(&cs, "outbound|443||api.example.com");
    assert_eq!(kind(api), cluster::DiscoveryType::StrictDns);
    let la = api.load_assignment.as_ref().unwrap();
    let ep = &la.endpoints[0].lb_endpoints[0];
    let Some(lb_endpoint::HostIdentifier::Endpoint(e)) = &ep.host_identifier else {
        panic!("no endpoint")
    };
    let addr = format!("{:?}", e.address);
    assert!(
        addr.contains("api.example.com") && addr.contains("443"),
        "{addr}"
    );

    let cache = find(&cs, "outbound|6379||cache.shop.svc.cluster.local");
    assert_eq!(kind(cache), cluster::DiscoveryType::OriginalDst);
    assert_eq!(cache.lb_policy, cluster::LbPolicy::ClusterProvided as i32);
    assert!(cache.eds_cluster_config.is_none() && cache.load_assignment.is_none());
}

#[test]
fn registry_only_scope_sees_only_its_egress_hosts() {
    let cs: Vec<Cluster> = generate(
        CLUSTER,
        &proxy("locked", "10.1.0.9", InterceptionMode::Redirect),
        &mesh(),
        &[],
    );
    assert!(cs.iter().all(|c| !c.name.contains("web.other")));
    assert!(cs.iter().any(|c| c.name.contains("reviews.shop")));
}

/// The clusters as they were made before being made in name order: every one in scope
/// order, then a stable sort by name keeping the first of each name (and the last EDS
/// target of each name).
fn reference(
    scope: &SidecarScope,
    push: &PushContext,
    inbound: bool,
) -> (Vec<Cluster>, Vec<(String, String, EndpointFilter)>) {
    let defaults = ClusterDefaults::default();
    let ctx = super::BuildContext {
        push,
        defaults: &defaults,
        mesh_identity: false,
    };
    let mut clusters = Vec::new();
    let mut eds = BTreeMap::new();
    for svc in &scope.services {
        let rule = scope.destination_rule(&svc.hostname).map(|r| &r.spec);
        for port in &svc.ports {
            let subsets = std::iter::once(None)
                .chain(rule.into_iter().flat_map(|r| r.subsets.iter()).map(Some));
            for subset in subsets {
                let name = cluster_name(
                    port.port,
                    subset.map_or("", |s| s.name.as_str()),
                    &svc.hostname,
                );
                if let Some((c, filter, _)) = outbound(name, svc, port, rule, subset, &ctx) {
                    if let Some((filter, _)) = filter {
                        eds.insert(c.name.clone(), (svc.hostname.clone(), filter));
                    }
                    clusters.push(c);
                }
            }
        }
    }
    clusters.push(blackhole(&defaults));
    clusters.push(passthrough(&defaults, PASSTHROUGH_CLUSTER));
    if inbound {
        clusters.push(inbound_passthrough_cluster(&defaults));
    }
    clusters.sort_by(|a, b| a.name.cmp(&b.name));
    clusters.dedup_by(|a, b| a.name == b.name);
    let eds = eds.into_iter().map(|(n, (h, f))| (n, h, f)).collect();
    (clusters, eds)
}

#[test]
fn clusters_made_in_name_order_are_those_sorted_after_making() {
    // The test mesh, and one whose reviews rule names a subset twice (differently).
    let base = mesh();
    let mut shop = (**base.namespace("shop").unwrap()).clone();
    let dr = &mut shop.destination_rules[0].spec;
    let mut twin = dr.subsets[0].clone();
    twin.labels.insert("track".into(), "canary".into());
    dr.subsets.push(twin);
    let twisted = base.with_changes(2, [Chunk::Namespace(shop)], []);
    for push in [&base, &twisted] {
        for ns in ["shop", "other", "locked", "bound"] {
            let scope = push.sidecar_scope(ns, &Default::default());
            for inbound in [true, false] {
                let options = super::ClusterOptions {
                    inbound_passthrough: inbound,
                    mesh_identity: false,
                };
                let built = build(&scope, push, &ClusterDefaults::default(), options);
                let eds: Vec<_> = built
                    .eds
                    .iter()
                    .map(|(n, t)| (n.clone(), t.service.hostname.clone(), t.filter.clone()))
                    .collect();
                let (want_clusters, want_eds) = reference(&scope, push, inbound);
                assert!(built.clusters == want_clusters, "{ns} {inbound}");
                assert_eq!(eds, want_eds, "{ns} {inbound}");
            }
        }
    }
}

/// `DNS_ROUND_ROBIN` is LOGICAL_DNS with one endpoint (Envoy takes no more), and an
/// ExternalName Service with no endpoints resolves the name it aliases.
#[test]
fn dns_round_robin_and_external_name() {
    let mut shop = shop();
    let api = shop
        .services
        .iter_mut()
        .find(|s| s.hostname == API)
        .unwrap();
    api.resolution = shoal_proto::model::Resolution::DnsRoundRobin;
    let mut legacy = service(
        "shop",
        "legacy",
        vec![port("http", 80, shoal_proto::model::Protocol::Http)],
        None,
    );
    legacy.resolution = shoal_proto::model::Resolution::Dns;
    legacy.external_name = "legacy.example.org".into();
    shop.services.push(legacy);
    let push = PushContext::from_chunks(1, [Chunk::Namespace(shop)]);
    let cs: Vec<Cluster> = generate(
        CLUSTER,
        &proxy("shop", "10.1.0.5", InterceptionMode::Redirect),
        &push,
        &[],
    );
    let api = find(&cs, "outbound|443||api.example.com");
    assert_eq!(kind(api), cluster::DiscoveryType::LogicalDns);
    let endpoints: usize = api
        .load_assignment
        .iter()
        .flat_map(|la| la.endpoints.iter())
        .map(|l| l.lb_endpoints.len())
        .sum();
    assert_eq!(endpoints, 1);

    let legacy = find(&cs, "outbound|80||legacy.shop.svc.cluster.local");
    assert_eq!(kind(legacy), cluster::DiscoveryType::StrictDns);
    let addr = format!("{:?}", legacy.load_assignment);
    assert!(addr.contains("legacy.example.org"), "{addr}");
}

/// A UDP port gets neither a cluster nor a listener (a TCP one would take its traffic):
/// Istio's sidecars do not proxy UDP.
#[test]
fn udp_ports_are_not_proxied() {
    use super::super::types::LISTENER;
    use envoy_types::pb::envoy::config::listener::v3::Listener;
    use shoal_proto::model::Protocol;
    let mut shop = shop();
    shop.services.push(service(
        "shop",
        "dns",
        vec![
            port("dns-udp", 5353, Protocol::Udp),
            port("dns-tcp", 5354, Protocol::Tcp),
        ],
        Some("10.0.9.9"),
    ));
    let push = PushContext::from_chunks(1, [Chunk::Namespace(shop)]);
    let p = proxy("shop", "10.1.0.5", InterceptionMode::Redirect);
    let cs: Vec<Cluster> = generate(CLUSTER, &p, &push, &[]);
    let names: Vec<_> = cs
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| n.contains("dns.shop"))
        .collect();
    assert_eq!(names, ["outbound|5354||dns.shop.svc.cluster.local"]);
    let ls: Vec<Listener> = generate(LISTENER, &p, &push, &[]);
    assert!(
        ls.iter().all(|l| !l.name.ends_with("_5353")),
        "{:?}",
        ls.iter().map(|l| &l.name).collect::<Vec<_>>()
    );
    assert!(ls.iter().any(|l| l.name.ends_with("_5354")));
}
