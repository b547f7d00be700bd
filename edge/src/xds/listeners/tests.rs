use super::super::testing::*;
use super::super::types::LISTENER;
use super::*;
use envoy_types::pb::envoy::config::core::v3::{
    address::Address as A, socket_address::PortSpecifier,
};
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, filter};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use envoy_types::pb::google::protobuf::BoolValue;

fn listeners(ns: &str, mode: InterceptionMode) -> Vec<Listener> {
    generate(LISTENER, &proxy(ns, "10.1.0.5", mode), &mesh(), &[])
}

fn names(ls: &[Listener]) -> Vec<&str> {
    ls.iter().map(|l| l.name.as_str()).collect()
}

fn find<'a>(ls: &'a [Listener], name: &str) -> &'a Listener {
    ls.iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no listener {name}"))
}

fn bound(l: &Listener) -> (String, u32) {
    let Some(A::SocketAddress(sa)) = l.address.as_ref().and_then(|a| a.address.as_ref()) else {
        panic!("no address")
    };
    let Some(PortSpecifier::PortValue(port)) = sa.port_specifier else {
        panic!("no port")
    };
    (sa.address.clone(), port)
}

fn typed(f: &Filter) -> &envoy_types::pb::google::protobuf::Any {
    match &f.config_type {
        Some(filter::ConfigType::TypedConfig(any)) => any,
        _ => panic!("filter {} has no typed config", f.name),
    }
}

fn hcm(l: &Listener) -> HttpConnectionManager {
    unpack(typed(&l.filter_chains[0].filters[0]))
}

fn tcp_cluster(chain: &FilterChain) -> String {
    let proxy: TcpProxy = unpack(typed(&chain.filters[0]));
    match proxy.cluster_specifier {
        Some(tcp_proxy::ClusterSpecifier::Cluster(c)) => c,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn none_mode_binds_the_proxy_ip_without_virtual_listeners() {
    let ls = listeners("shop", InterceptionMode::None);
    assert_eq!(
        names(&ls),
        [
            "10.1.0.5_443",
            "10.1.0.5_5432",
            "10.1.0.5_6379",
            "10.1.0.5_80",
            "10.1.0.5_9080",
            "10.1.0.5_9090",
        ]
    );
    for l in &ls {
        assert_eq!(bound(l).0, "10.1.0.5");
        assert_eq!(l.bind_to_port, Some(BoolValue { value: true }));
    }
    let http = hcm(find(&ls, "10.1.0.5_9080"));
    let Some(http_connection_manager::RouteSpecifier::Rds(rds)) = http.route_specifier else {
        panic!("not RDS")
    };
    assert_eq!(rds.route_config_name, "9080");
    assert_eq!(
        tcp_cluster(&find(&ls, "10.1.0.5_5432").filter_chains[0]),
        "outbound|5432||db.shop.svc.cluster.local"
    );
}

#[test]
fn redirect_mode_listeners() {
    let ls = listeners("shop", InterceptionMode::Redirect);
    assert_eq!(
        names(&ls),
        [
            "0.0.0.0_443",
            "0.0.0.0_6379",
            "0.0.0.0_80",
            "0.0.0.0_9080",
            "0.0.0.0_9090",
            "10.96.0.12_5432",
            "virtualInbound",
            "virtualOutbound",
        ]
    );
    let http = find(&ls, "0.0.0.0_9080");
    assert_eq!(http.bind_to_port, Some(BoolValue { value: false }));
    assert_eq!(bound(http), ("0.0.0.0".to_string(), 9080));
    let manager = hcm(http);
    assert_eq!(manager.stat_prefix, "outbound_0.0.0.0_9080");
    assert_eq!(
        manager.http_filters.last().unwrap().name,
        "envoy.filters.http.router"
    );
    let Some(http_connection_manager::RouteSpecifier::Rds(rds)) = manager.route_specifier else {
        panic!("not RDS")
    };
    assert_eq!(rds.route_config_name, "9080");
    assert!(rds.config_source.unwrap().config_source_specifier.is_some());

    let db = find(&ls, "10.96.0.12_5432");
    assert_eq!(bound(db), ("10.96.0.12".to_string(), 5432));

    let outbound = find(&ls, "virtualOutbound");
    assert_eq!(bound(outbound), ("0.0.0.0".to_string(), 15001));
    assert_eq!(outbound.use_original_dst, Some(BoolValue { value: true }));
    assert_eq!(
        tcp_cluster(outbound.default_filter_chain.as_ref().unwrap()),
        "PassthroughCluster"
    );
    let inbound = find(&ls, "virtualInbound");
    assert_eq!(bound(inbound), ("0.0.0.0".to_string(), 15006));
    let passthrough = inbound
        .filter_chains
        .iter()
        .find(|c| c.name == "virtualInbound");
    assert_eq!(
        tcp_cluster(passthrough.unwrap()),
        "InboundPassthroughCluster"
    );
}

/// Istio's `blackholeFilterChain` (`virtualOutbound-blackhole`): a connection whose
/// original destination is 15001 itself is blackholed, not passed through back into the
/// listener.
#[test]
fn virtual_outbound_blackholes_traffic_addressed_to_itself() {
    let ls = listeners("shop", InterceptionMode::Redirect);
    let outbound = find(&ls, "virtualOutbound");
    let [guard] = outbound.filter_chains.as_slice() else {
        panic!("one filter chain expected")
    };
    assert_eq!(guard.name, "virtualOutbound-blackhole");
    let m = guard.filter_chain_match.as_ref().unwrap();
    assert_eq!(m.destination_port.map(|p| p.value), Some(15001));
    assert_eq!(tcp_cluster(guard), "BlackHoleCluster");
}

#[test]
fn registry_only_blackholes_unknown_traffic() {
    let ls = listeners("locked", InterceptionMode::Redirect);
    let outbound = find(&ls, "virtualOutbound");
    assert_eq!(
        tcp_cluster(outbound.default_filter_chain.as_ref().unwrap()),
        "BlackHoleCluster"
    );
}

#[test]
fn tproxy_is_transparent() {
    let ls = listeners("shop", InterceptionMode::Tproxy);
    assert_eq!(
        find(&ls, "virtualOutbound").transparent,
        Some(BoolValue { value: true })
    );
}

#[test]
fn sidecar_egress_port_and_bind_are_honoured() {
    let ls = listeners("bound", InterceptionMode::Redirect);
    let l = find(&ls, "127.0.0.1_8080");
    assert_eq!(bound(l), ("127.0.0.1".to_string(), 8080));
    assert_eq!(l.bind_to_port, Some(BoolValue { value: false }));
    let Some(http_connection_manager::RouteSpecifier::Rds(rds)) = hcm(l).route_specifier else {
        panic!("not RDS")
    };
    assert_eq!(rds.route_config_name, "8080");
    // Without capture the egress bind is still the address bound.
    let ls = listeners("bound", InterceptionMode::None);
    assert_eq!(
        find(&ls, "127.0.0.1_8080").bind_to_port,
        Some(BoolValue { value: true })
    );
    assert!(ls.iter().any(|l| l.name == "10.1.0.5_9080"));
}
