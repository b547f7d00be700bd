//! LDS for proxyless gRPC servers (gRFC A36: `xds.NewGRPCServer`, grpcio's
//! `grpc.server(..., xds=True)`): a server listening on `<ip>:<port>` asks for
//! `xds.istio.io/grpc/lds/inbound/<ip>:<port>` (its bootstrap's
//! `server_listener_resource_name_template`) and serves only once it has it. As Istio's
//! `grpcgen`: a listener at that address when a service selects the workload's port,
//! with one filter chain (no match: gRPC matches no TLS, ALPN or SNI), whose transport
//! and RBAC filters are the workload's security ([`super::security::server`]), and a
//! connection manager whose inline route hands every call to the application
//! (`non_forwarding_action`).

use super::super::super::util::{address, any};
use super::names::{SERVER_LISTENER_PREFIX, host_port};
use super::security::server::{ServerChain, ServerSecurity};
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{
    NonForwardingAction, Route, RouteConfiguration, RouteMatch, VirtualHost, route, route_match,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, http_connection_manager, http_filter,
};
use shoal_proto::push_context::InboundPort;

/// Whether `name` is a server's listener.
pub fn is_server_listener(name: &str) -> bool {
    name.starts_with(SERVER_LISTENER_PREFIX)
}

/// The server listener `name` of a workload with `inbound` ports; `None` (reported)
/// when no service selects its port.
pub fn listener(
    name: &str,
    inbound: &[InboundPort],
    security: &ServerSecurity<'_>,
    proxy: &str,
    warnings: &mut Vec<String>,
) -> Option<Listener> {
    let Some((host, port)) = name
        .strip_prefix(SERVER_LISTENER_PREFIX)
        .and_then(host_port)
    else {
        warnings.push(format!(
            "proxyless gRPC server {proxy} asks for listener {name:?}, which names no <ip>:<port>"
        ));
        return None;
    };
    if !inbound.iter().any(|p| p.target_port == port) {
        warnings.push(format!(
            "proxyless gRPC server {proxy} asks for listener {name}, but no service selects its port {port}: it stays not serving"
        ));
        return None;
    }
    let chain = security.chain(port, warnings);
    Some(Listener {
        name: name.to_string(),
        address: Some(address(host, port)),
        filter_chains: vec![filter_chain(chain)],
        ..Default::default()
    })
}

fn filter_chain(chain: ServerChain) -> FilterChain {
    let mut http_filters = chain.http_filters;
    // Must be last.
    http_filters.push(HttpFilter {
        name: "envoy.filters.http.router".into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(
            any(&Router::default()),
        )),
        ..Default::default()
    });
    let hcm = HttpConnectionManager {
        stat_prefix: "inbound".into(),
        route_specifier: Some(http_connection_manager::RouteSpecifier::RouteConfig(
            RouteConfiguration {
                name: "inbound".into(),
                virtual_hosts: vec![VirtualHost {
                    name: "inbound".into(),
                    domains: vec!["*".into()],
                    routes: vec![Route {
                        r#match: Some(RouteMatch {
                            path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
                            ..Default::default()
                        }),
                        action: Some(route::Action::NonForwardingAction(NonForwardingAction {})),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            },
        )),
        http_filters,
        ..Default::default()
    };
    FilterChain {
        name: format!("inbound-{}", chain.name),
        filters: vec![Filter {
            name: "envoy.filters.network.http_connection_manager".into(),
            config_type: Some(filter::ConfigType::TypedConfig(any(&hcm))),
        }],
        transport_socket: chain.transport_socket,
        ..Default::default()
    }
}
