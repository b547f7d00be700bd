//! TLS egress told apart by SNI: on a TLS or HTTPS port, services without a VIP (DNS
//! ServiceEntries) share the wildcard listener, and Envoy's TLS inspector picks each
//! connection's chain by the server name the client sent. A VirtualService `tls` route
//! (`match: [{sniHosts, port}]`) sends the names it matches to its destinations. TLS
//! services addressed by a range, or sharing a VIP, are told apart by SNI as well.

use super::chains::stat_and_target;
use crate::xds::listeners::tcp_proxy_filter;
use crate::xds::util::{any, cluster_name};
use envoy_types::pb::envoy::config::listener::v3::{
    FilterChain, FilterChainMatch, ListenerFilter, listener_filter,
};
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::tcp_proxy;
use shoal_proto::model::{Service, hosts_intersect};
use shoal_proto::push_context::SidecarScope;
use std::collections::BTreeSet;

/// The SNI chains of one port, in the order services claim server names.
pub struct SniChains {
    port: u32,
    chains: Vec<FilterChain>,
    /// Server names already matched: Envoy rejects two chains with one match.
    taken: BTreeSet<String>,
}

impl SniChains {
    pub fn new(port: u32) -> SniChains {
        SniChains {
            port,
            chains: Vec::new(),
            taken: BTreeSet::new(),
        }
    }

    /// The chains of `svc`: its VirtualService's `tls` routes for the names they match
    /// (those of the service), then its own host name to its cluster.
    pub fn add(&mut self, scope: &SidecarScope, svc: &Service) {
        self.add_routes(scope, svc);
        let own = cluster_name(self.port, "", &svc.hostname);
        self.push(
            &[svc.hostname.as_str()],
            &own,
            tcp_proxy::ClusterSpecifier::Cluster(own.clone()),
        );
    }

    /// The chains of the `tls` routes of `svc`'s VirtualService, for the names they
    /// match (those of the service).
    fn add_routes(&mut self, scope: &SidecarScope, svc: &Service) {
        let port = self.port;
        let routes = scope
            .virtual_service_for(&svc.hostname)
            .map(|vs| vs.spec.tls.as_slice())
            .unwrap_or_default();
        for route in routes.iter().filter(|r| !r.route.is_empty()) {
            for m in &route.matches {
                // Source labels vary by proxy and subnets by destination: this listener
                // serves a whole scope by name, so such matches are not its to apply.
                if m.port.is_some_and(|p| p != port)
                    || !m.source_labels.is_empty()
                    || !m.destination_subnets.is_empty()
                {
                    continue;
                }
                let names: Vec<&str> = m
                    .sni_hosts
                    .iter()
                    .map(String::as_str)
                    .filter(|n| hosts_intersect(n, &svc.hostname))
                    .collect();
                let default = cluster_name(port, "", &svc.hostname);
                let (stat, target) = stat_and_target(scope, &route.route, port, default);
                self.push(&names, &stat, target);
            }
        }
    }

    /// A chain for those of `names` no earlier chain matches.
    fn push(&mut self, names: &[&str], stat: &str, target: tcp_proxy::ClusterSpecifier) {
        let server_names: Vec<String> = names
            .iter()
            .filter(|n| self.taken.insert(n.to_string()))
            .map(|n| n.to_string())
            .collect();
        if server_names.is_empty() {
            return;
        }
        self.chains.push(FilterChain {
            filter_chain_match: Some(FilterChainMatch {
                server_names,
                transport_protocol: "tls".into(),
                ..Default::default()
            }),
            filters: vec![tcp_proxy_filter(stat, target)],
            ..Default::default()
        });
    }

    pub fn into_chains(self) -> Vec<FilterChain> {
        self.chains
    }
}

/// The chains of a TLS service addressed by ranges (a ServiceEntry's `addresses:
/// [10.0.0.0/16]`) on the wildcard listener: within `ranges`, its `tls` routes and its
/// own host name by SNI, as Istio matches a TLS service with a CIDR on its host name, so
/// that entries sharing a range are told apart. `taken` holds the (ranges, name) pairs
/// already matched.
pub fn ranged(
    scope: &SidecarScope,
    svc: &Service,
    port: u32,
    ranges: &FilterChainMatch,
    taken: &mut BTreeSet<String>,
) -> Vec<FilterChain> {
    let key: Vec<String> = ranges
        .prefix_ranges
        .iter()
        .map(|r| {
            let len = r.prefix_len.unwrap_or_default().value;
            format!("{}/{len}", r.address_prefix)
        })
        .collect();
    let key = key.join(",");
    let mut sni = SniChains::new(port);
    sni.add(scope, svc);
    sni.into_chains()
        .into_iter()
        .filter_map(|mut chain| {
            let m = chain.filter_chain_match.as_mut()?;
            m.server_names
                .retain(|name| taken.insert(format!("{key}|{name}")));
            if m.server_names.is_empty() {
                return None;
            }
            m.prefix_ranges = ranges.prefix_ranges.clone();
            Some(chain)
        })
        .collect()
}

/// `more` added to the chains of a listener another service claimed first (services
/// sharing a VIP): each chain whose match no chain there already has, with the server
/// names no chain there matches (Istio merges TCP filter chains of services on one
/// address; Envoy rejects two chains with one match).
pub fn merge(chains: &mut Vec<FilterChain>, more: Vec<FilterChain>) {
    let names: BTreeSet<String> = chains
        .iter()
        .filter_map(|c| c.filter_chain_match.as_ref())
        .flat_map(|m| m.server_names.iter().cloned())
        .collect();
    for mut chain in more {
        let Some(m) = chain.filter_chain_match.as_mut() else {
            if !chains.iter().any(|c| c.filter_chain_match.is_none()) {
                chains.push(chain);
            }
            continue;
        };
        if m.server_names.is_empty() {
            continue;
        }
        m.server_names.retain(|n| !names.contains(n));
        if !m.server_names.is_empty() {
            chains.push(chain);
        }
    }
}

/// The chains of a TLS service's own (VIP) listener: its `tls` routes by server name,
/// then `tcp` for every other connection.
pub fn routed(
    scope: &SidecarScope,
    svc: &Service,
    port: u32,
    tcp: FilterChain,
) -> Vec<FilterChain> {
    let mut sni = SniChains::new(port);
    sni.add_routes(scope, svc);
    let mut chains = sni.into_chains();
    chains.push(tcp);
    chains
}

/// The TLS inspector, when a chain matches on a server name.
pub fn inspector(chains: &[FilterChain]) -> Option<ListenerFilter> {
    let needed = chains.iter().any(|c| {
        c.filter_chain_match
            .as_ref()
            .is_some_and(|m| !m.server_names.is_empty())
    });
    needed.then(|| ListenerFilter {
        name: "envoy.filters.listener.tls_inspector".into(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(any(
            &TlsInspector::default(),
        ))),
        ..Default::default()
    })
}
