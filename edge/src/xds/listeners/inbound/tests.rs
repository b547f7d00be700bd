use super::super::super::clusters::inbound::tests::{INGRESS_WORKLOAD, WORKLOAD, workload_mesh};
use super::super::super::testing::{generate, proxy, unpack};
use super::super::super::types::LISTENER;
use super::*;
use envoy_types::pb::envoy::config::route::v3::route_action::ClusterSpecifier;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;

fn listeners(ns: &str, ip: &str, mode: InterceptionMode) -> Vec<Listener> {
    generate(LISTENER, &proxy(ns, ip, mode), &workload_mesh(), &[])
}

fn find<'a>(ls: &'a [Listener], name: &str) -> &'a Listener {
    ls.iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no listener {name}"))
}

/// (chain name, destination port, ALPNs) of every chain, in order.
fn chains(l: &Listener) -> Vec<(String, Option<u32>, Vec<String>)> {
    l.filter_chains
        .iter()
        .map(|c| {
            let m = c.filter_chain_match.clone().unwrap_or_default();
            (
                c.name.clone(),
                m.destination_port.map(|p| p.value),
                m.application_protocols,
            )
        })
        .collect()
}

fn typed(c: &FilterChain) -> &envoy_types::pb::google::protobuf::Any {
    match c.filters[0].config_type.as_ref() {
        Some(filter::ConfigType::TypedConfig(any)) => any,
        _ => panic!("untyped filter"),
    }
}

fn hcm(c: &FilterChain) -> HttpConnectionManager {
    unpack(typed(c))
}

fn tcp(c: &FilterChain) -> TcpProxy {
    unpack(typed(c))
}

fn tcp_cluster(c: &FilterChain) -> String {
    match tcp(c).cluster_specifier {
        Some(tcp_proxy::ClusterSpecifier::Cluster(name)) => name,
        other => panic!("not one cluster: {other:?}"),
    }
}

fn inline_route(c: &FilterChain) -> RouteConfiguration {
    match hcm(c).route_specifier {
        Some(http_connection_manager::RouteSpecifier::RouteConfig(r)) => r,
        other => panic!("no inline route: {other:?}"),
    }
}

fn chain_for(l: &Listener, port: u32, http: bool) -> &FilterChain {
    l.filter_chains
        .iter()
        .find(|c| {
            let m = c.filter_chain_match.as_ref().unwrap();
            m.destination_port.as_ref().map(|p| p.value) == Some(port)
                && (m.application_protocols.is_empty() != http)
        })
        .unwrap_or_else(|| panic!("no chain for {port} (http: {http})"))
}

fn s(v: &str) -> String {
    v.to_string()
}

#[test]
fn virtual_inbound_has_a_chain_per_workload_port() {
    let ls = listeners("app", WORKLOAD, InterceptionMode::Redirect);
    let vi = find(&ls, "virtualInbound");
    let alpn = vec![s("http/1.1"), s("h2c")];
    assert_eq!(
        chains(vi),
        [
            (s("virtualInbound-blackhole"), Some(15006), vec![]),
            (s("virtualInbound-catchall-http"), None, alpn.clone()),
            (s("virtualInbound"), None, vec![]),
            (s("0.0.0.0_5432"), Some(5432), vec![]),
            (s("0.0.0.0_7070"), Some(7070), vec![]),
            (s("0.0.0.0_8080"), Some(8080), vec![]),
            // The unnamed port is sniffed: HTTP when the inspector says so, else TCP.
            (s("0.0.0.0_9000"), Some(9000), alpn),
            (s("0.0.0.0_9000"), Some(9000), vec![]),
        ]
    );
    assert!(vi.filter_chains.iter().all(|c| {
        c.filter_chain_match.as_ref().unwrap().transport_protocol == "raw_buffer"
            || c.name == "virtualInbound-blackhole"
    }));

    // HTTP: an HCM with Istio's inline route, no RDS.
    let http = chain_for(vi, 8080, false);
    let h = hcm(http);
    assert_eq!(h.stat_prefix, "inbound_0.0.0.0_8080");
    let rc = inline_route(http);
    assert_eq!(rc.name, "inbound|8080||");
    // `alias` sorts before `web`: its service port names the virtual host.
    assert_eq!(rc.virtual_hosts[0].name, "inbound|http|81");
    assert_eq!(rc.virtual_hosts[0].domains, ["*"]);
    let route = &rc.virtual_hosts[0].routes[0];
    assert_eq!(route.name, "default");
    let Some(route::Action::Route(action)) = &route.action else {
        panic!("not a route")
    };
    assert_eq!(
        action.cluster_specifier,
        Some(ClusterSpecifier::Cluster(s("inbound|8080||")))
    );
    assert_eq!(action.timeout, Some(duration(std::time::Duration::ZERO)));

    // gRPC: HTTP/2 downstream.
    assert!(
        hcm(chain_for(vi, 7070, false))
            .http2_protocol_options
            .is_some()
    );

    // TCP: stats and cluster named after the cluster.
    let db = chain_for(vi, 5432, false);
    assert_eq!(tcp(db).stat_prefix, "inbound|5432||");
    assert_eq!(tcp_cluster(db), "inbound|5432||");

    // Sniffed: both chains go to the port's cluster.
    assert_eq!(
        inline_route(chain_for(vi, 9000, true)).name,
        "inbound|9000||"
    );
    assert_eq!(tcp_cluster(chain_for(vi, 9000, false)), "inbound|9000||");
}

#[test]
fn passthrough_chains_and_listener_filters() {
    let ls = listeners("app", WORKLOAD, InterceptionMode::Redirect);
    let vi = find(&ls, "virtualInbound");
    let by_name = |n: &str| vi.filter_chains.iter().find(|c| c.name == n).unwrap();
    assert_eq!(
        tcp_cluster(by_name("virtualInbound-blackhole")),
        "BlackHoleCluster"
    );
    assert_eq!(
        tcp_cluster(by_name("virtualInbound")),
        "InboundPassthroughCluster"
    );
    let catch_all = by_name("virtualInbound-catchall-http");
    assert_eq!(hcm(catch_all).stat_prefix, "InboundPassthroughCluster");
    assert_eq!(inline_route(catch_all).name, "InboundPassthroughCluster");
    assert_eq!(
        inline_route(catch_all).virtual_hosts[0].name,
        "inbound|http|0"
    );

    let names: Vec<&str> = vi
        .listener_filters
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "envoy.filters.listener.original_dst",
            "envoy.filters.listener.http_inspector"
        ]
    );
    // The inspector is off where no chain needs it: declared HTTP and TCP ports, 15006.
    let Some(ListenerFilterChainMatchPredicate {
        rule: Some(listener_filter_chain_match_predicate::Rule::OrMatch(set)),
    }) = &vi.listener_filters[1].filter_disabled
    else {
        panic!("inspector enabled everywhere")
    };
    let disabled: Vec<i32> = set
        .rules
        .iter()
        .map(|r| match &r.rule {
            Some(listener_filter_chain_match_predicate::Rule::DestinationPortRange(range)) => {
                assert_eq!(range.end, range.start + 1);
                range.start
            }
            other => panic!("unexpected rule {other:?}"),
        })
        .collect();
    assert_eq!(disabled, [5432, 7070, 8080, 15006]);
    assert!(vi.continue_on_listener_filters_timeout);
}

#[test]
fn unknown_workload_gets_only_passthrough() {
    let ls = listeners("app", "10.5.0.99", InterceptionMode::Redirect);
    let vi = find(&ls, "virtualInbound");
    assert_eq!(vi.filter_chains.len(), 3);
    // Without interception there is no virtualInbound and no inbound listener at all.
    let none = listeners("app", WORKLOAD, InterceptionMode::None);
    assert!(
        none.iter()
            .all(|l| l.traffic_direction != TrafficDirection::Inbound as i32)
    );
}

#[test]
fn sidecar_ingress_replaces_service_targets() {
    let ls = listeners("ing", INGRESS_WORKLOAD, InterceptionMode::Redirect);
    let vi = find(&ls, "virtualInbound");
    // The bind defaults to the proxy's address (naming the chains); 9090 captures
    // nothing, so it binds a listener of its own instead.
    let names: Vec<String> = chains(vi).into_iter().map(|c| c.0).skip(3).collect();
    assert_eq!(
        names,
        [
            format!("{INGRESS_WORKLOAD}_7000"),
            format!("{INGRESS_WORKLOAD}_7000"),
            format!("{INGRESS_WORKLOAD}_8080"),
        ]
    );
    let rc = inline_route(chain_for(vi, 8080, false));
    assert_eq!(rc.name, "inbound|8080||");
    assert_eq!(
        rc.virtual_hosts[0].routes[0]
            .decorator
            .as_ref()
            .unwrap()
            .operation,
        "ingress.ing:8080/*"
    );

    let bound = find(&ls, &format!("{INGRESS_WORKLOAD}_9090"));
    assert_eq!(bound.traffic_direction, TrafficDirection::Inbound as i32);
    assert_eq!(bound.bind_to_port, None, "binds (the default)");
    assert!(
        bound.listener_filters.is_empty(),
        "no original_dst, nothing to sniff"
    );
    assert_eq!(tcp_cluster(&bound.filter_chains[0]), "inbound|9090||");

    // Without interception every ingress listener binds, and there is no virtualInbound.
    let none = listeners("ing", INGRESS_WORKLOAD, InterceptionMode::None);
    for port in [7000, 8080, 9090] {
        find(&none, &format!("{INGRESS_WORKLOAD}_{port}"));
    }
    assert!(none.iter().all(|l| l.name != "virtualInbound"));
    // The sniffed port still sniffs, without original_dst.
    let sniffed = find(&none, &format!("{INGRESS_WORKLOAD}_7000"));
    let names: Vec<&str> = sniffed
        .listener_filters
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(names, ["envoy.filters.listener.http_inspector"]);
}

#[test]
fn pods_of_one_deployment_share_inbound_listeners() {
    let push = workload_mesh();
    let g = super::super::super::Generator::new();
    let lds = |ip: &str| {
        let rs = g
            .generate(
                LISTENER,
                &proxy("app", ip, InterceptionMode::Redirect),
                &push,
                &[],
            )
            .unwrap();
        rs.into_iter().find(|r| r.name == "virtualInbound").unwrap()
    };
    // web's other pods serve the same ports: one listener, encoded once.
    assert!(std::sync::Arc::ptr_eq(&lds("10.5.0.8"), &lds("10.5.0.10")));
    // WORKLOAD serves more services: its own.
    assert!(!std::sync::Arc::ptr_eq(&lds("10.5.0.8"), &lds(WORKLOAD)));
}
