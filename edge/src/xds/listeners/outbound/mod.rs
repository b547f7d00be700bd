//! A sidecar's outbound listeners for service ports, as Istio's outbound listener builder
//! makes them: what each port's services speak decides the listener's filter chains.
//!
//! ```text
//!  0.0.0.0_<port>  (wildcard: services without a VIP, and every service of an HTTP port)
//!    ├ prefix_ranges <vip>/32 or <cidr>  TCP service sharing an HTTP port, CIDR entry → tcp_proxy
//!    ├ server_names  <host>              TLS/HTTPS service without a VIP (tls routes) → tcp_proxy
//!    ├ no match:     HTTP → RDS "<port>" (on 0.0.0.0: only what is detected as HTTP) |
//!    │               sniffed (http/1.1, h2c → RDS; else tcp_proxy) | TCP
//!    └ default:      what no chain claims → PassthroughCluster / BlackHoleCluster
//!  <vip>_<port>    TCP → tcp_proxy; sniffed for a port of unknown protocol; TLS: tls routes by
//!                  server name, then tcp_proxy
//! ```
//! Without capture every listener binds the proxy's own address, so a port's listeners
//! collapse into one: the first claim (the wildcard one) wins.

mod chains;
mod sniffing;
mod tls;

pub use chains::{rds_http_chain, route_destinations, single_port};

use super::{ListenerOptions, catch_all};
use crate::proxy::InterceptionMode;
use crate::xds::util::{
    BLACKHOLE_CLUSTER, PASSTHROUGH_CLUSTER, WILDCARD_IP, address, cluster_name, duration,
};
use envoy_types::pb::envoy::config::core::v3::TrafficDirection;
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener};
use envoy_types::pb::google::protobuf::BoolValue;
use shoal_proto::config::istio::EgressListener;
use shoal_proto::model::{Protocol, Service};
use shoal_proto::push_context::{SidecarScope, TrafficMode};
use std::collections::{BTreeMap, BTreeSet};

/// How a port's wildcard listener treats traffic no more specific chain claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PortKind {
    /// Some service speaks HTTP on it (or a Sidecar egress listener declares it so).
    Http,
    /// Its services' protocol is unknown: HTTP is detected, the rest is TCP.
    Sniffed,
    /// TCP, TLS and the like: forwarded as bytes.
    Opaque,
}

impl PortKind {
    fn of(protocol: Protocol) -> PortKind {
        match protocol {
            p if p.is_http() => PortKind::Http,
            Protocol::Unknown => PortKind::Sniffed,
            _ => PortKind::Opaque,
        }
    }
}

/// The kind of every port the scope's services (or its Sidecar's egress listeners) use:
/// HTTP if any service speaks HTTP there, else sniffed if any service's protocol is
/// unknown. A Sidecar egress listener's declared protocol wins.
fn port_kinds(scope: &SidecarScope) -> BTreeMap<u32, PortKind> {
    let mut kinds: BTreeMap<u32, PortKind> = BTreeMap::new();
    for p in scope.services.iter().flat_map(|s| s.ports.iter()) {
        if !p.protocol.is_proxied() {
            continue;
        }
        let kind = PortKind::of(p.protocol);
        let entry = kinds.entry(p.port).or_insert(kind);
        if kind == PortKind::Http || (kind == PortKind::Sniffed && *entry == PortKind::Opaque) {
            *entry = kind;
        }
    }
    for p in scope.egress.iter().filter_map(|e| e.port.as_ref()) {
        let kind = PortKind::of(Protocol::infer(&p.name, None, &p.protocol));
        kinds.insert(p.number, kind);
    }
    kinds
}

/// Ports that get a route configuration named after them: HTTP ports, and sniffed ones
/// (whose detected HTTP is routed).
pub fn http_ports(scope: &SidecarScope) -> BTreeSet<u32> {
    port_kinds(scope)
        .into_iter()
        .filter_map(|(port, kind)| (kind != PortKind::Opaque).then_some(port))
        .collect()
}

/// The cluster that takes traffic to hosts the mesh does not know: the egress proxy's
/// (ALLOW_ANY with `egressProxy`), `PassthroughCluster` (ALLOW_ANY) or `BlackHoleCluster`.
pub fn fallthrough_cluster(scope: &SidecarScope) -> String {
    match (scope.outbound_mode, &scope.egress_proxy) {
        (TrafficMode::RegistryOnly, _) => BLACKHOLE_CLUSTER.into(),
        (TrafficMode::AllowAny, Some(proxy)) => {
            let port = proxy
                .port
                .as_ref()
                .map(|p| p.number)
                .or_else(|| single_port(scope, &proxy.host))
                .unwrap_or_default();
            cluster_name(port, &proxy.subset, &proxy.host)
        }
        (TrafficMode::AllowAny, None) => PASSTHROUGH_CLUSTER.into(),
    }
}

/// The Sidecar egress listener that declares `port`, if any.
fn egress_for(scope: &SidecarScope, port: u32) -> Option<&EgressListener> {
    scope
        .egress
        .iter()
        .find(|e| e.port.as_ref().is_some_and(|p| p.number == port))
}

/// Where a listener listens.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Bind {
    pub ip: String,
    pub port: u32,
    pub bind_to_port: bool,
}

impl Bind {
    pub fn name(&self) -> String {
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

/// The first usable virtual IP of a service (headless services and CIDR-only entries
/// have none). A full-length range (`/32` for IPv4, `/128` for IPv6) is a single
/// address, so a VIP too, as Istio's ServiceEntry conversion makes it; a shorter one
/// (`2001:db8::/32`) is a range.
fn vip(svc: &Service) -> Option<&str> {
    svc.addresses
        .iter()
        .map(|a| single_address(a))
        .find(|a| !a.is_empty() && *a != WILDCARD_IP && !a.contains('/'))
}

/// `a` without its prefix length when that covers the whole address.
fn single_address(a: &str) -> &str {
    let Some((ip, len)) = a.split_once('/') else {
        return a;
    };
    let full = match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => "32",
        Ok(std::net::IpAddr::V6(_)) => "128",
        Err(_) => return a,
    };
    if len == full { ip } else { a }
}

/// The address ranges of a service (a ServiceEntry's `addresses: [10.0.0.0/16]`).
fn cidrs(svc: &Service) -> Vec<&str> {
    if vip(svc).is_some() {
        return Vec::new();
    }
    svc.addresses
        .iter()
        .map(String::as_str)
        .filter(|a| a.contains('/'))
        .collect()
}

/// Every outbound listener for the scope's service ports.
pub(super) fn build(scope: &SidecarScope, opts: ListenerOptions<'_>) -> Vec<Listener> {
    let kinds = port_kinds(scope);
    // One listener per address; the first claim wins (Istio keeps the existing listener
    // on a conflict): the wildcard listeners claim first, then the VIP ones.
    let mut by_bind: BTreeMap<(String, u32), Box<Listener>> = BTreeMap::new();
    for (&port, &kind) in &kinds {
        let bind = bind_for(scope, opts, port, None);
        let chains = wildcard_chains(scope, port, kind, bind.ip == WILDCARD_IP);
        if chains.is_empty() {
            continue;
        }
        let l = wildcard_listener(scope, &bind, chains);
        by_bind.insert((bind.ip, port), Box::new(l));
    }
    // The VIP listeners claimed by a TLS service: another TLS service on the same
    // address joins them.
    let mut vip_claims: BTreeMap<(String, u32), bool> = BTreeMap::new();
    for svc in &scope.services {
        let Some(vip) = vip(svc) else { continue };
        for p in svc.ports.iter().filter(|p| p.protocol.is_proxied()) {
            if kinds.get(&p.port) == Some(&PortKind::Http) {
                continue; // a chain of the wildcard HTTP listener
            }
            let bind = bind_for(scope, opts, p.port, Some(vip));
            let key = (bind.ip.clone(), p.port);
            if let Some(existing) = by_bind.get_mut(&key) {
                if vip_claims.get(&key) == Some(&true)
                    && matches!(p.protocol, Protocol::Https | Protocol::Tls)
                {
                    // Two TLS services on one address: the second's SNI routes join
                    // the first's listener.
                    let tcp = chains::tcp_chain(scope, svc, p.port, None);
                    let mut chains = std::mem::take(&mut existing.filter_chains);
                    tls::merge(&mut chains, tls::routed(scope, svc, p.port, tcp));
                    let default = existing.default_filter_chain.take();
                    **existing = listener_with(&bind, chains, default);
                    continue;
                }
                tracing::debug!(
                    listener = existing.name,
                    service = svc.hostname,
                    "outbound listener conflict: keeping the first"
                );
                continue;
            }
            vip_claims.insert(
                key.clone(),
                matches!(p.protocol, Protocol::Https | Protocol::Tls),
            );
            let tcp = chains::tcp_chain(scope, svc, p.port, None);
            let chains = match p.protocol {
                Protocol::Unknown => sniffing::chains(p.port, tcp),
                Protocol::Https | Protocol::Tls => tls::routed(scope, svc, p.port, tcp),
                _ => vec![tcp],
            };
            by_bind.insert(key, Box::new(listener_with(&bind, chains, None)));
        }
    }
    by_bind.into_values().map(|l| *l).collect()
}

/// The chains of `port`'s wildcard listener, most specific first; empty when no
/// service needs one. On the wildcard address an HTTP port's chain takes only what the
/// HTTP inspector finds to be plaintext HTTP, so that TCP or TLS to a host the mesh does
/// not know falls through to the listener's default chain (`PassthroughCluster` or
/// `BlackHoleCluster`), as Istio builds it for a port that a pod may reach outside the
/// registry; bound to the proxy's own address the port is HTTP alone, as in Istio.
fn wildcard_chains(
    scope: &SidecarScope,
    port: u32,
    kind: PortKind,
    wildcard: bool,
) -> Vec<FilterChain> {
    let mut matched = Vec::new();
    let mut taken = BTreeSet::new();
    let mut sni_in_ranges = BTreeSet::new();
    let mut sni = tls::SniChains::new(port);
    let mut fallback: Option<Vec<FilterChain>> = match kind {
        PortKind::Http if wildcard => Some(vec![chains::http_chain(
            port,
            Some(sniffing::detected_http()),
        )]),
        PortKind::Http => Some(vec![chains::http_chain(port, None)]),
        _ => None,
    };
    for svc in &scope.services {
        let Some(p) = svc.port(port).filter(|p| p.protocol.is_proxied()) else {
            continue;
        };
        let ranges = cidrs(svc);
        if !ranges.is_empty() {
            if matches!(p.protocol, Protocol::Https | Protocol::Tls) {
                // Told apart from other entries of the range by SNI.
                let mut unclaimed = BTreeSet::new();
                if let Some(m) = chains::destination_match(&ranges, &svc.hostname, &mut unclaimed) {
                    matched.extend(tls::ranged(scope, svc, port, &m, &mut sni_in_ranges));
                }
            } else if !p.protocol.is_http()
                && let Some(m) = chains::destination_match(&ranges, &svc.hostname, &mut taken)
            {
                matched.push(chains::tcp_chain(scope, svc, port, Some(m)));
            }
            continue;
        }
        if let Some(vip) = vip(svc) {
            // A TCP service on a port another speaks HTTP on: told apart by its VIP.
            if kind == PortKind::Http
                && PortKind::of(p.protocol) == PortKind::Opaque
                && let Some(m) = chains::destination_match(&[vip], &svc.hostname, &mut taken)
            {
                matched.push(chains::tcp_chain(scope, svc, port, Some(m)));
            }
            continue;
        }
        match p.protocol {
            Protocol::Https | Protocol::Tls => sni.add(scope, svc),
            // Routed by host name in the port's route configuration.
            _ if kind == PortKind::Http => {}
            _ if fallback.is_some() => {
                tracing::debug!(
                    service = svc.hostname,
                    port,
                    "outbound listener conflict: the port's wildcard chain is taken"
                );
            }
            Protocol::Unknown => {
                let tcp = chains::tcp_chain(scope, svc, port, None);
                fallback = Some(sniffing::chains(port, tcp));
            }
            _ => fallback = Some(vec![chains::tcp_chain(scope, svc, port, None)]),
        }
    }
    matched.extend(sni.into_chains());
    if matched.is_empty() && fallback.is_none() {
        return Vec::new();
    }
    matched.extend(fallback.unwrap_or_default());
    matched
}

/// The wildcard listener: the inspectors its chains need, and, when every chain
/// matches on something, unknown traffic to the fallthrough cluster.
fn wildcard_listener(scope: &SidecarScope, bind: &Bind, chains: Vec<FilterChain>) -> Listener {
    let complete = chains.iter().any(|c| c.filter_chain_match.is_none());
    let default = (!complete).then(|| catch_all(&fallthrough_cluster(scope)));
    listener_with(bind, chains, default)
}

/// A listener at `bind` with `chains` (and the inspectors they match on).
fn listener_with(bind: &Bind, chains: Vec<FilterChain>, default: Option<FilterChain>) -> Listener {
    let mut filters: Vec<_> = tls::inspector(&chains).into_iter().collect();
    filters.extend(sniffing::inspector(&chains));
    let inspected = !filters.is_empty();
    Listener {
        name: bind.name(),
        address: Some(address(&bind.ip, bind.port)),
        filter_chains: chains,
        default_filter_chain: default,
        listener_filters: filters,
        // As Istio's default protocol detection timeout (0s: none): a client that speaks
        // first is never cut short; one that waits for the server waits.
        listener_filters_timeout: inspected.then(|| duration(std::time::Duration::ZERO)),
        continue_on_listener_filters_timeout: inspected,
        bind_to_port: Some(BoolValue {
            value: bind.bind_to_port,
        }),
        traffic_direction: TrafficDirection::Outbound as i32,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
