//! The filter chains of outbound listeners: HTTP to a port's route configuration, and
//! TCP to a service's cluster (or where its VirtualService `tcp` route sends it).

use super::super::{http_filters, tcp_proxy_filter};
use crate::xds::util::{WILDCARD_IP, ads_config_source, any, cluster_name, u32_value};
use envoy_types::pb::envoy::config::core::v3::CidrRange;
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, FilterChainMatch, filter};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds, http_connection_manager,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::tcp_proxy;
use envoy_types::pb::google::protobuf::BoolValue;
use shoal_proto::config::istio::{Destination, RouteDestination};
use shoal_proto::model::Service;
use shoal_proto::push_context::SidecarScope;
use std::collections::BTreeSet;

/// HTTP through the route configuration named after `port`.
pub fn http_chain(port: u32, filter_chain_match: Option<FilterChainMatch>) -> FilterChain {
    FilterChain {
        filter_chain_match,
        ..rds_http_chain(port, port.to_string(), false)
    }
}

/// [`http_chain`], with `first` before the connection manager's usual filters.
pub fn http_chain_with(
    port: u32,
    filter_chain_match: Option<FilterChainMatch>,
    first: Vec<HttpFilter>,
) -> FilterChain {
    FilterChain {
        filter_chain_match,
        ..hcm_chain(port, port.to_string(), false, first)
    }
}

/// An HTTP connection manager on `port` taking its routes from RDS `route_name`, with
/// Istio's outbound stat name however the listener is bound. `use_remote_address`: the
/// proxy is the edge of the mesh (a gateway), trusting no forwarded address but its own
/// peer's.
pub fn rds_http_chain(port: u32, route_name: String, use_remote_address: bool) -> FilterChain {
    hcm_chain(port, route_name, use_remote_address, Vec::new())
}

/// [`rds_http_chain`] with `first` before the usual HTTP filters.
fn hcm_chain(
    port: u32,
    route_name: String,
    use_remote_address: bool,
    first: Vec<HttpFilter>,
) -> FilterChain {
    let mut filters = first;
    filters.extend(http_filters());
    let hcm = HttpConnectionManager {
        stat_prefix: format!("outbound_{WILDCARD_IP}_{port}"),
        codec_type: http_connection_manager::CodecType::Auto as i32,
        route_specifier: Some(http_connection_manager::RouteSpecifier::Rds(Rds {
            config_source: Some(ads_config_source()),
            route_config_name: route_name,
        })),
        http_filters: filters,
        use_remote_address: Some(BoolValue {
            value: use_remote_address,
        }),
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

/// The connections of `svc:port` to its cluster (or its `tcp` route's destinations).
pub fn tcp_chain(
    scope: &SidecarScope,
    svc: &Service,
    port: u32,
    filter_chain_match: Option<FilterChainMatch>,
) -> FilterChain {
    let (stat, target) = tcp_target(scope, svc, port);
    FilterChain {
        filter_chain_match,
        filters: vec![tcp_proxy_filter(&stat, target)],
        ..Default::default()
    }
}

/// Matches connections to any of `ranges` (`10.0.0.0/16`, or a bare address) not
/// already in `taken` (Envoy rejects two chains with one match); `None` when none is
/// left. A range that does not parse is left out, with a warning naming `host`.
pub fn destination_match(
    ranges: &[&str],
    host: &str,
    taken: &mut BTreeSet<String>,
) -> Option<FilterChainMatch> {
    let mut prefix_ranges = Vec::new();
    for r in ranges {
        let Some(cidr) = cidr_range(r) else {
            tracing::warn!(
                host,
                address = r,
                "service address is not an IP or CIDR: skipped"
            );
            continue;
        };
        let key = format!(
            "{}/{}",
            cidr.address_prefix,
            cidr.prefix_len.unwrap_or_default().value
        );
        if taken.insert(key) {
            prefix_ranges.push(cidr);
        }
    }
    (!prefix_ranges.is_empty()).then(|| FilterChainMatch {
        prefix_ranges,
        ..Default::default()
    })
}

/// `10.0.0.0/16` or `10.0.0.1` (a whole-length range) as Envoy's CIDR range.
fn cidr_range(range: &str) -> Option<CidrRange> {
    let (ip, len) = match range.split_once('/') {
        Some((ip, len)) => (ip, Some(len.parse::<u32>().ok()?)),
        None => (range, None),
    };
    let addr: std::net::IpAddr = ip.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    (len <= max).then(|| CidrRange {
        address_prefix: addr.to_string(),
        prefix_len: Some(u32_value(len)),
    })
}

/// Where a TCP chain for `svc:port` sends traffic: the service's cluster, or the
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
    stat_and_target(scope, &route.route, port, default)
}

/// A route's target, and the stat prefix it is counted under: the single cluster, or
/// `default` for a split.
pub fn stat_and_target(
    scope: &SidecarScope,
    route: &[RouteDestination],
    port: u32,
    default: String,
) -> (String, tcp_proxy::ClusterSpecifier) {
    let target = route_destinations(scope, route, port);
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
