//! LDS: a sidecar's outbound listeners, as Istio's listener builder makes them.
//!
//! ```text
//!  captured (REDIRECT/TPROXY)                    not captured (NONE)
//!  virtualOutbound 0.0.0.0:15001 ─original dst─┐ app ──► <proxy ip>:<port>
//!    ├► 0.0.0.0_<port>  HTTP → RDS "<port>"    │      <proxy ip>_<port>  HTTP → RDS "<port>"
//!    ├► <vip>_<port>    TCP  → outbound|...    │      <proxy ip>_<port>  TCP  → outbound|...
//!    └► default chain: Passthrough/BlackHole ◄─┘
//!  virtualInbound  0.0.0.0:15006 → a chain per inbound port, else passthrough ([`inbound`])
//! ```
//! Captured listeners do not bind (`bind_to_port: false`): `virtualOutbound` hands each
//! connection to the listener matching its original destination. Without capture the
//! application dials the proxy, so each listener binds the proxy's own address (several
//! proxies may share a host, so neither the wildcard nor the fixed ports 15001/15006).

mod inbound;

use super::routes;
use super::util::{
    BLACKHOLE_CLUSTER, PASSTHROUGH_CLUSTER, VIRTUAL_OUTBOUND, VIRTUAL_OUTBOUND_PORT, WILDCARD_IP,
    address, ads_config_source, any, cluster_name, sort_by_name,
};
use crate::proxy::InterceptionMode;
use envoy_types::pb::envoy::config::core::v3::TrafficDirection;
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener, filter};
use envoy_types::pb::envoy::extensions::filters::http::cors::v3::Cors;
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::HttpFault;
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds, http_connection_manager, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use envoy_types::pb::google::protobuf::BoolValue;
use shoal_proto::config::istio::{Destination, EgressListener, RouteDestination};
use shoal_proto::model::{Protocol, Service};
use shoal_proto::push_context::{InboundPort, SidecarScope, TrafficMode};
use std::collections::{BTreeMap, BTreeSet};

/// The proxy-specific inputs: everything else comes from the scope.
#[derive(Clone, Copy, Debug)]
pub struct ListenerOptions<'a> {
    pub mode: InterceptionMode,
    /// The proxy's own address, bound to when traffic is not captured.
    pub proxy_ip: &'a str,
    /// The workload's inbound ports (its service targets), sorted by target port.
    pub inbound: &'a [InboundPort],
}

/// The Sidecar egress listener that declares `port`, if any.
fn egress_for(scope: &SidecarScope, port: u32) -> Option<&EgressListener> {
    scope
        .egress
        .iter()
        .find(|e| e.port.as_ref().is_some_and(|p| p.number == port))
}

/// Ports that get an HTTP listener and a route configuration named after them: those a
/// visible service speaks HTTP on, unless a Sidecar egress listener declares the port
/// with another protocol (its declaration wins, HTTP or not).
pub fn http_ports(scope: &SidecarScope) -> BTreeSet<u32> {
    let mut http: BTreeMap<u32, bool> = BTreeMap::new();
    for p in scope.services.iter().flat_map(|s| s.ports.iter()) {
        *http.entry(p.port).or_default() |= p.protocol.is_http();
    }
    for p in scope.egress.iter().filter_map(|e| e.port.as_ref()) {
        http.insert(
            p.number,
            Protocol::infer(&p.name, None, &p.protocol).is_http(),
        );
    }
    http.into_iter()
        .filter_map(|(port, is_http)| is_http.then_some(port))
        .collect()
}

/// Where a listener listens.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Bind {
    ip: String,
    port: u32,
    bind_to_port: bool,
}

impl Bind {
    fn name(&self) -> String {
        format!("{}_{}", self.ip, self.port)
    }
}

/// The bind of the outbound listener for `port` (and `vip`, for a TCP service).
fn bind_for(scope: &SidecarScope, opts: ListenerOptions<'_>, port: u32, vip: Option<&str>) -> Bind {
    let egress = egress_for(scope, port);
    let bind_to_port =
        opts.mode == InterceptionMode::None || egress.is_some_and(|e| e.capture_mode == "NONE");
    let ip = match egress.map(|e| e.bind.as_str()).filter(|b| !b.is_empty()) {
        Some(bind) => bind.to_string(),
        None if bind_to_port => opts.proxy_ip.to_string(),
        None => vip.unwrap_or(WILDCARD_IP).to_string(),
    };
    Bind {
        ip,
        port,
        bind_to_port,
    }
}

/// The first usable virtual IP of a service (headless services have none).
fn vip(svc: &Service) -> Option<&str> {
    svc.addresses
        .iter()
        .map(String::as_str)
        .find(|a| !a.is_empty() && *a != WILDCARD_IP)
}

/// Every listener of `scope` for a proxy, sorted by name.
pub fn build(scope: &SidecarScope, opts: ListenerOptions<'_>) -> Vec<Listener> {
    // One listener per address; the first claim wins, HTTP ports claiming first, as
    // Istio keeps the existing listener on a conflict.
    let mut by_bind: BTreeMap<(String, u32), Box<Listener>> = BTreeMap::new();
    let http = http_ports(scope);
    for &port in &http {
        let bind = bind_for(scope, opts, port, None);
        let listener = listener(&bind, http_filter_chain(port));
        by_bind.insert((bind.ip, port), Box::new(listener));
    }
    for svc in &scope.services {
        for port in svc
            .ports
            .iter()
            .filter(|p| p.protocol.is_proxied() && !http.contains(&p.port))
        {
            let bind = bind_for(scope, opts, port.port, vip(svc));
            let key = (bind.ip.clone(), port.port);
            if let Some(existing) = by_bind.get(&key) {
                tracing::debug!(
                    listener = existing.name,
                    service = svc.hostname,
                    "outbound listener conflict: keeping the first"
                );
                continue;
            }
            let (stat, target) = tcp_target(scope, svc, port.port);
            let chain = FilterChain {
                filters: vec![tcp_proxy_filter(&stat, target)],
                ..Default::default()
            };
            by_bind.insert(key, Box::new(listener(&bind, chain)));
        }
    }
    let mut out: Vec<Listener> = by_bind.into_values().map(|l| *l).collect();
    if opts.mode != InterceptionMode::None {
        out.push(virtual_outbound(scope, opts.mode));
    }
    for l in inbound::build(scope, opts) {
        // An inbound listener bound where an outbound one is: the outbound one stays.
        if out.iter().any(|o| o.name == l.name) {
            tracing::debug!(listener = l.name, "inbound listener conflict: skipped");
            continue;
        }
        out.push(l);
    }
    sort_by_name(out, |l| &l.name)
}

fn listener(bind: &Bind, chain: FilterChain) -> Listener {
    Listener {
        name: bind.name(),
        address: Some(address(&bind.ip, bind.port)),
        filter_chains: vec![chain],
        bind_to_port: Some(BoolValue {
            value: bind.bind_to_port,
        }),
        traffic_direction: TrafficDirection::Outbound as i32,
        ..Default::default()
    }
}

fn http_filter_chain(port: u32) -> FilterChain {
    let hcm = HttpConnectionManager {
        // Istio's stat name for a port's outbound HTTP traffic, however it is bound.
        stat_prefix: format!("outbound_{WILDCARD_IP}_{port}"),
        codec_type: http_connection_manager::CodecType::Auto as i32,
        route_specifier: Some(http_connection_manager::RouteSpecifier::Rds(Rds {
            config_source: Some(ads_config_source()),
            route_config_name: port.to_string(),
        })),
        http_filters: http_filters(),
        use_remote_address: Some(BoolValue { value: false }),
        normalize_path: Some(BoolValue { value: true }),
        upgrade_configs: vec![http_connection_manager::UpgradeConfig {
            upgrade_type: "websocket".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    FilterChain {
        filters: vec![Filter {
            name: "envoy.filters.network.http_connection_manager".into(),
            config_type: Some(filter::ConfigType::TypedConfig(any(&hcm))),
        }],
        ..Default::default()
    }
}

/// The HTTP filters of an HTTP connection manager. Fault injection and CORS act only
/// where a route configures them, as in Istio.
pub fn http_filters() -> Vec<HttpFilter> {
    vec![
        HttpFilter {
            name: routes::FAULT_FILTER.into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(any(
                &HttpFault::default(),
            ))),
            ..Default::default()
        },
        HttpFilter {
            name: routes::CORS_FILTER.into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(any(&Cors::default()))),
            ..Default::default()
        },
        HttpFilter {
            name: "envoy.filters.http.router".into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(
                any(&Router::default()),
            )),
            ..Default::default()
        },
    ]
}

/// Where a TCP listener for `svc:port` sends traffic: the service's cluster, or the
/// destinations of the first simple VirtualService TCP route for that port.
fn tcp_target(
    scope: &SidecarScope,
    svc: &Service,
    port: u32,
) -> (String, tcp_proxy::ClusterSpecifier) {
    let default = cluster_name(port, "", &svc.hostname);
    let route = scope.virtual_service_for(&svc.hostname).and_then(|vs| {
        vs.spec.tcp.iter().find(|r| {
            !r.route.is_empty()
                && (r.matches.is_empty()
                    || r.matches.iter().any(|m| {
                        m.destination_subnets.is_empty() && m.port.is_none_or(|p| p == port)
                    }))
        })
    });
    let Some(route) = route else {
        return (
            default.clone(),
            tcp_proxy::ClusterSpecifier::Cluster(default),
        );
    };
    let target = route_destinations(scope, &route.route, port);
    let stat = match &target {
        tcp_proxy::ClusterSpecifier::Cluster(single) => single.clone(),
        _ => default,
    };
    (stat, target)
}

/// Where a TCP or TLS route's destinations take a connection on `port`: one cluster, or
/// a weighted split.
pub fn route_destinations(
    scope: &SidecarScope,
    route: &[RouteDestination],
    port: u32,
) -> tcp_proxy::ClusterSpecifier {
    let dest_cluster = |d: &Destination| {
        let dest_port = d
            .port
            .as_ref()
            .map(|p| p.number)
            .or_else(|| single_port(scope, &d.host))
            .unwrap_or(port);
        cluster_name(dest_port, &d.subset, &d.host)
    };
    if let [only] = route {
        return tcp_proxy::ClusterSpecifier::Cluster(dest_cluster(&only.destination));
    }
    let mut clusters: Vec<_> = route
        .iter()
        .filter(|d| d.weight > 0)
        .map(|d| tcp_proxy::weighted_cluster::ClusterWeight {
            name: dest_cluster(&d.destination),
            weight: u32::try_from(d.weight).unwrap_or(0),
            ..Default::default()
        })
        .collect();
    if clusters.is_empty() {
        // All weights zero: an invalid split; spread evenly rather than send nowhere.
        clusters = route
            .iter()
            .map(|d| tcp_proxy::weighted_cluster::ClusterWeight {
                name: dest_cluster(&d.destination),
                weight: 1,
                ..Default::default()
            })
            .collect();
    }
    tcp_proxy::ClusterSpecifier::WeightedClusters(tcp_proxy::WeightedCluster { clusters })
}

/// The port of a destination service that has exactly one (Istio's default port).
pub fn single_port(scope: &SidecarScope, host: &str) -> Option<u32> {
    match scope.service(host).map(|s| s.ports.as_slice()) {
        Some([only]) => Some(only.port),
        _ => None,
    }
}

pub fn tcp_proxy_filter(stat_prefix: &str, target: tcp_proxy::ClusterSpecifier) -> Filter {
    let proxy = TcpProxy {
        stat_prefix: stat_prefix.to_string(),
        cluster_specifier: Some(target),
        ..Default::default()
    };
    Filter {
        name: "envoy.filters.network.tcp_proxy".into(),
        config_type: Some(filter::ConfigType::TypedConfig(any(&proxy))),
    }
}

fn catch_all(cluster: &str) -> FilterChain {
    FilterChain {
        name: format!("{cluster}FilterChain"),
        filters: vec![tcp_proxy_filter(
            cluster,
            tcp_proxy::ClusterSpecifier::Cluster(cluster.to_string()),
        )],
        ..Default::default()
    }
}

fn transparent(mode: InterceptionMode) -> Option<BoolValue> {
    (mode == InterceptionMode::Tproxy).then_some(BoolValue { value: true })
}

/// Receives every redirected outbound connection and hands it to the listener for its
/// original destination; what no listener claims goes to the catch-all.
fn virtual_outbound(scope: &SidecarScope, mode: InterceptionMode) -> Listener {
    let cluster = match scope.outbound_mode {
        TrafficMode::AllowAny => PASSTHROUGH_CLUSTER,
        TrafficMode::RegistryOnly => BLACKHOLE_CLUSTER,
    };
    Listener {
        name: VIRTUAL_OUTBOUND.into(),
        address: Some(address(WILDCARD_IP, VIRTUAL_OUTBOUND_PORT)),
        use_original_dst: Some(BoolValue { value: true }),
        transparent: transparent(mode),
        default_filter_chain: Some(catch_all(cluster)),
        traffic_direction: TrafficDirection::Outbound as i32,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
