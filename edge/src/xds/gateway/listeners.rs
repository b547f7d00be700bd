//! LDS for routers: one listener per gateway port, bound on `0.0.0.0:<port>`, with the
//! filter chains of its servers, guarded by the AuthorizationPolicies and
//! RequestAuthentications that select the router (but an `AUTO_PASSTHROUGH` port's,
//! [`auto_passthrough`]).

use super::auto_passthrough;
use super::secrets::has_certificate;
use super::tls::downstream;
use crate::xds::listeners::{rds_http_chain, route_destinations, tcp_proxy_filter};
use crate::xds::security::authz;
use crate::xds::util::{WILDCARD_IP, address, any, sort_by_name};
use envoy_types::pb::envoy::config::core::v3::TrafficDirection;
use envoy_types::pb::envoy::config::listener::v3::{
    FilterChain, FilterChainMatch, Listener, ListenerFilter, listener_filter,
};
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::tcp_proxy;
use envoy_types::pb::google::protobuf::BoolValue;
use shoal_proto::config::istio::{RouteDestination, TcpRoute, TlsMatchAttributes};
use shoal_proto::model::hosts_intersect;
use shoal_proto::push_context::gateway::{
    BoundServer, GatewayPort, MergedGateway, PortKind, names_gateway, virtual_services_for,
};
use shoal_proto::push_context::security::Authorization;
use shoal_proto::push_context::{ConfigIndex, SidecarScope};
use std::collections::BTreeSet;

/// What a router's listeners are built from.
pub struct RouterContext<'a> {
    pub index: &'a ConfigIndex,
    pub scope: &'a SidecarScope,
    /// The router's namespace: where its credentials are, what VirtualServices it sees.
    pub namespace: &'a str,
    /// The AuthorizationPolicies that select the router.
    pub authorization: Authorization,
    /// The `jwt_authn` filter of the RequestAuthentications that select the router.
    pub request_authn: Option<HttpFilter>,
}

/// The router's listeners, sorted by name, and what was left out and why.
pub fn build(ctx: &RouterContext<'_>, merged: &MergedGateway) -> (Vec<Listener>, Vec<String>) {
    let mut warnings = merged.warnings.clone();
    let listeners = merged
        .ports
        .iter()
        .filter_map(|port| {
            let chains = match port.kind {
                PortKind::Http => vec![http_chain(port.number, format!("http.{}", port.number))],
                PortKind::Https => https_chains(ctx, port, &mut warnings),
                PortKind::TlsTerminated => tls_terminated_chains(ctx, port, &mut warnings),
                PortKind::TlsPassthrough => passthrough_chains(ctx, port),
                PortKind::Tcp => tcp_chain(ctx, port).into_iter().collect(),
                PortKind::AutoPassthrough => auto_passthrough::chains(&auto_passthrough::targets(
                    ctx.scope,
                    &auto_passthrough::port_hosts(port),
                )),
            };
            let mut chains = chains;
            // The mTLS an AUTO_PASSTHROUGH port forwards is opaque to it: its destination
            // enforces the policies (Istio guards none of these chains either).
            if port.kind != PortKind::AutoPassthrough {
                authz::guard_chains(&mut chains, &ctx.authorization, ctx.request_authn.as_ref());
            }
            if chains.is_empty() {
                warnings.push(format!(
                    "gateway port {}: no server has a usable configuration: no listener",
                    port.number
                ));
                return None;
            }
            Some(listener(port, chains))
        })
        .collect();
    warnings.sort();
    warnings.dedup();
    (sort_by_name(listeners, |l| &l.name), warnings)
}

fn listener(port: &GatewayPort, chains: Vec<FilterChain>) -> Listener {
    let inspects_sni = port.kind != PortKind::Http && port.kind != PortKind::Tcp;
    Listener {
        name: format!("{WILDCARD_IP}_{}", port.number),
        address: Some(address(WILDCARD_IP, port.number)),
        filter_chains: chains,
        listener_filters: inspects_sni
            .then(|| ListenerFilter {
                name: "envoy.filters.listener.tls_inspector".into(),
                config_type: Some(listener_filter::ConfigType::TypedConfig(any(
                    &TlsInspector::default(),
                ))),
                ..Default::default()
            })
            .into_iter()
            .collect(),
        bind_to_port: Some(BoolValue { value: true }),
        traffic_direction: TrafficDirection::Outbound as i32,
        ..Default::default()
    }
}

/// An HTTP connection manager taking its routes from RDS `route_name`. A gateway is the
/// edge of the mesh: it trusts no forwarded address but its own peer's.
fn http_chain(port: u32, route_name: String) -> FilterChain {
    rds_http_chain(port, route_name, true)
}

fn sni_match(hosts: Vec<String>) -> Option<FilterChainMatch> {
    (!hosts.is_empty()).then(|| FilterChainMatch {
        server_names: hosts,
        ..Default::default()
    })
}

/// The servers of a TLS-terminating port whose credentials can be served; the others
/// are reported and left out, so that one missing Secret does not hold back the port.
fn servable<'a>(
    ctx: &RouterContext<'_>,
    port: &'a GatewayPort,
    warnings: &mut Vec<String>,
) -> Vec<&'a BoundServer> {
    port.servers
        .iter()
        .filter(|s| {
            let Some(tls) = &s.server().tls else {
                return false;
            };
            if tls.credential_name.is_empty()
                || has_certificate(ctx.index, ctx.namespace, &tls.credential_name)
            {
                return true;
            }
            warnings.push(format!(
                "Gateway {}: server on port {} names credential {:?}, which is not a TLS \
                 Secret in namespace {}: server left out",
                s.gateway_key(),
                port.number,
                tls.credential_name,
                ctx.namespace
            ));
            false
        })
        .collect()
}

/// The SNI names of a server, less those an earlier chain of the port already matches:
/// Envoy rejects two chains with the same match.
fn unclaimed_sni(server: &BoundServer, claimed: &mut BTreeSet<String>) -> Option<Vec<String>> {
    let hosts = server.sni_hosts();
    if hosts.is_empty() {
        return claimed.insert("*".into()).then(Vec::new);
    }
    let fresh: Vec<String> = hosts
        .into_iter()
        .filter(|h| claimed.insert(h.clone()))
        .collect();
    (!fresh.is_empty()).then_some(fresh)
}

fn https_chains(
    ctx: &RouterContext<'_>,
    port: &GatewayPort,
    warnings: &mut Vec<String>,
) -> Vec<FilterChain> {
    let mut claimed = BTreeSet::new();
    servable(ctx, port, warnings)
        .into_iter()
        .filter_map(|server| {
            let tls = server.server().tls.as_ref()?;
            let hosts = unclaimed_sni(server, &mut claimed)?;
            let mut chain = http_chain(port.number, server.https_route_name());
            chain.filter_chain_match = sni_match(hosts);
            chain.transport_socket = Some(downstream(tls, &["h2", "http/1.1"]));
            Some(chain)
        })
        .collect()
}

/// The first TCP route of a VirtualService bound to `server` that applies on `port`.
fn tcp_route<'a>(ctx: &RouterContext<'a>, server: &BoundServer, port: u32) -> Option<&'a TcpRoute> {
    let (gw_ns, gw_name) = (&server.gateway.namespace, &server.gateway.name);
    virtual_services_for(ctx.index, server, ctx.namespace)
        .into_iter()
        .find_map(|(vs, _)| {
            vs.spec.tcp.iter().find(|r| {
                !r.route.is_empty()
                    && (r.matches.is_empty()
                        || r.matches.iter().any(|m| {
                            m.port.is_none_or(|p| p == port)
                                && (m.gateways.is_empty()
                                    || names_gateway(&m.gateways, &vs.namespace, gw_ns, gw_name))
                        }))
            })
        })
}

fn tcp_proxy_chain(ctx: &RouterContext<'_>, route: &[RouteDestination], port: u32) -> FilterChain {
    let target = route_destinations(ctx.scope, route, port);
    let stat = match &target {
        tcp_proxy::ClusterSpecifier::Cluster(c) => c.clone(),
        _ => format!("{WILDCARD_IP}_{port}"),
    };
    FilterChain {
        filters: vec![tcp_proxy_filter(&stat, target)],
        ..Default::default()
    }
}

fn tcp_chain(ctx: &RouterContext<'_>, port: &GatewayPort) -> Option<FilterChain> {
    let server_port = |s: &BoundServer| s.server().port.as_ref().map_or(port.number, |p| p.number);
    port.servers.iter().find_map(|s| {
        tcp_route(ctx, s, server_port(s)).map(|r| tcp_proxy_chain(ctx, &r.route, server_port(s)))
    })
}

fn tls_terminated_chains(
    ctx: &RouterContext<'_>,
    port: &GatewayPort,
    warnings: &mut Vec<String>,
) -> Vec<FilterChain> {
    let mut claimed = BTreeSet::new();
    servable(ctx, port, warnings)
        .into_iter()
        .filter_map(|server| {
            let tls = server.server().tls.as_ref()?;
            let number = server
                .server()
                .port
                .as_ref()
                .map_or(port.number, |p| p.number);
            let route = tcp_route(ctx, server, number)?;
            let hosts = unclaimed_sni(server, &mut claimed)?;
            let mut chain = tcp_proxy_chain(ctx, &route.route, number);
            chain.filter_chain_match = sni_match(hosts);
            chain.transport_socket = Some(downstream(tls, &[]));
            Some(chain)
        })
        .collect()
}

/// A chain per SNI match of the TLS routes bound to the port's servers: the connection
/// goes, still encrypted, to the route's destination.
fn passthrough_chains(ctx: &RouterContext<'_>, port: &GatewayPort) -> Vec<FilterChain> {
    let mut claimed = BTreeSet::new();
    let mut chains = Vec::new();
    for server in &port.servers {
        let number = server
            .server()
            .port
            .as_ref()
            .map_or(port.number, |p| p.number);
        let server_hosts = server.sni_hosts();
        let (gw_ns, gw_name) = (&server.gateway.namespace, &server.gateway.name);
        for (vs, _) in virtual_services_for(ctx.index, server, ctx.namespace) {
            for route in vs.spec.tls.iter().filter(|r| !r.route.is_empty()) {
                let applies = |m: &&TlsMatchAttributes| {
                    m.port.is_none_or(|p| p == number)
                        && (m.gateways.is_empty()
                            || names_gateway(&m.gateways, &vs.namespace, gw_ns, gw_name))
                };
                for m in route.matches.iter().filter(applies) {
                    let sni: Vec<String> = m
                        .sni_hosts
                        .iter()
                        .filter(|h| {
                            server_hosts.is_empty()
                                || server_hosts.iter().any(|s| hosts_intersect(s, h))
                        })
                        .filter(|h| claimed.insert((*h).clone()))
                        .cloned()
                        .collect();
                    if sni.is_empty() {
                        continue;
                    }
                    let mut chain = tcp_proxy_chain(ctx, &route.route, number);
                    chain.filter_chain_match = sni_match(sni);
                    chains.push(chain);
                }
            }
        }
    }
    chains
}
