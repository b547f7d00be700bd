//! LDS: a sidecar's outbound listeners, as Istio's listener builder makes them.
//!
//! ```text
//!  captured (REDIRECT/TPROXY)                    not captured (NONE)
//!  virtualOutbound 0.0.0.0:15001 ─original dst─┐ app ──► <proxy ip>:<port>
//!    ├► 0.0.0.0_<port>  HTTP/sniffed/SNI/CIDR  │      <proxy ip>_<port>  (one per port)
//!    ├► <vip>_<port>    TCP or sniffed         │
//!    └► default chain: Passthrough/egressProxy/BlackHole
//!  (the chains of each: [`outbound`])
//!  virtualInbound  0.0.0.0:15006 → a chain per inbound port, else passthrough ([`inbound`])
//! ```
//! Captured listeners do not bind (`bind_to_port: false`): `virtualOutbound` hands each
//! connection to the listener matching its original destination. Without capture the
//! application dials the proxy, so each listener binds the proxy's own address (several
//! proxies may share a host, so neither the wildcard nor the fixed ports 15001/15006).

mod inbound;
mod outbound;

pub use outbound::{
    fallthrough_cluster, http_ports, rds_http_chain, route_destinations, single_port,
};

use super::routes;
use super::security::InboundSecurity;
use super::util::{
    BLACKHOLE_CLUSTER, VIRTUAL_OUTBOUND, VIRTUAL_OUTBOUND_PORT, WILDCARD_IP, address, any,
    sort_by_name,
};
use crate::proxy::InterceptionMode;
use envoy_types::pb::envoy::config::core::v3::TrafficDirection;
use envoy_types::pb::envoy::config::listener::v3::{
    Filter, FilterChain, FilterChainMatch, Listener, filter,
};
use envoy_types::pb::envoy::extensions::filters::http::cors::v3::Cors;
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::HttpFault;
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use envoy_types::pb::google::protobuf::{BoolValue, UInt32Value};
use shoal_proto::push_context::{InboundPort, SidecarScope};

/// The proxy-specific inputs: everything else comes from the scope.
#[derive(Clone, Copy, Debug)]
pub struct ListenerOptions<'a> {
    pub mode: InterceptionMode,
    /// The proxy's own address, bound to when traffic is not captured.
    pub proxy_ip: &'a str,
    /// The workload's inbound ports (its service targets), sorted by target port.
    pub inbound: &'a [InboundPort],
    /// How its inbound chains are reached and guarded.
    pub inbound_security: &'a InboundSecurity<'a>,
}

/// Every listener of `scope` for a proxy, sorted by name.
pub fn build(scope: &SidecarScope, opts: ListenerOptions<'_>) -> Vec<Listener> {
    let mut out = outbound::build(scope, opts);
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
/// original destination; what no listener claims goes to the catch-all (the egress
/// proxy, when the Sidecar names one).
fn virtual_outbound(scope: &SidecarScope, mode: InterceptionMode) -> Listener {
    let cluster = outbound::fallthrough_cluster(scope);
    // Istio's loop guard: a connection addressed to 15001 itself was not redirected
    // from elsewhere, and passing it through would send it back here.
    let blackhole = FilterChain {
        name: format!("{VIRTUAL_OUTBOUND}-blackhole"),
        filter_chain_match: Some(FilterChainMatch {
            destination_port: Some(UInt32Value {
                value: VIRTUAL_OUTBOUND_PORT,
            }),
            ..Default::default()
        }),
        ..catch_all(BLACKHOLE_CLUSTER)
    };
    Listener {
        name: VIRTUAL_OUTBOUND.into(),
        address: Some(address(WILDCARD_IP, VIRTUAL_OUTBOUND_PORT)),
        use_original_dst: Some(BoolValue { value: true }),
        transparent: transparent(mode),
        filter_chains: vec![blackhole],
        default_filter_chain: Some(catch_all(&cluster)),
        traffic_direction: TrafficDirection::Outbound as i32,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
