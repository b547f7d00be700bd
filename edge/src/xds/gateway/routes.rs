//! RDS for routers: `http.<port>` for a port's plain HTTP servers, and one
//! `https.<port>.<port name>.<gateway>.<namespace>` per HTTPS server, each with a virtual
//! host per host of the VirtualServices bound to the servers.

use crate::xds::routes::{Binding, is_catch_all, virtual_service_routes};
use crate::xds::util::sort_by_name;
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, Route, RouteConfiguration, RouteMatch, VirtualHost, route, route_match,
    virtual_host,
};
use envoy_types::pb::google::protobuf::BoolValue;
use shoal_proto::push_context::gateway::{
    BoundServer, MergedGateway, PortKind, virtual_services_for,
};
use shoal_proto::push_context::{ConfigIndex, SidecarScope};
use std::collections::{BTreeMap, HashSet};

/// What a router's routes are built from.
pub struct RouteContext<'a> {
    pub index: &'a ConfigIndex,
    pub scope: &'a SidecarScope,
    pub namespace: &'a str,
    pub labels: &'a BTreeMap<String, String>,
}

/// Every route configuration of the router, sorted by name, and what deserves a look.
pub fn build(
    ctx: &RouteContext<'_>,
    merged: &MergedGateway,
) -> (Vec<RouteConfiguration>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut configs = Vec::new();
    for port in &merged.ports {
        match port.kind {
            PortKind::Http => {
                let servers: Vec<&BoundServer> = port.servers.iter().collect();
                let name = format!("http.{}", port.number);
                configs.push(route_config(
                    ctx,
                    name,
                    port.number,
                    &servers,
                    &mut warnings,
                ));
            }
            PortKind::Https => {
                for server in &port.servers {
                    let name = server.https_route_name();
                    if configs.iter().any(|c: &RouteConfiguration| c.name == name) {
                        warnings.push(format!(
                            "Gateway {}: two HTTPS servers on port {} share the port name: \
                             the second is left out",
                            server.gateway_key(),
                            port.number
                        ));
                        continue;
                    }
                    configs.push(route_config(
                        ctx,
                        name,
                        port.number,
                        &[server],
                        &mut warnings,
                    ));
                }
            }
            _ => {}
        }
    }
    warnings.sort();
    warnings.dedup();
    (sort_by_name(configs, |c| &c.name), warnings)
}

fn route_config(
    ctx: &RouteContext<'_>,
    name: String,
    port: u32,
    servers: &[&BoundServer],
    warnings: &mut Vec<String>,
) -> RouteConfiguration {
    // One virtual host per host: Envoy rejects a domain listed twice. Several
    // VirtualServices for one host on a gateway are merged, as Istio merges them: their
    // routes in their order (the oldest first, as Istio takes them).
    let mut vhosts: BTreeMap<String, VirtualHost> = BTreeMap::new();
    let mut merged: HashSet<(String, String, String)> = HashSet::new();
    for server in servers {
        let redirect = server
            .server()
            .tls
            .as_ref()
            .is_some_and(|t| t.https_redirect);
        let server_port = server.server().port.as_ref().map_or(port, |p| p.number);
        let binding = Binding::Gateway {
            namespace: &server.gateway.namespace,
            name: &server.gateway.name,
        };
        for (vs, hosts) in virtual_services_for(ctx.index, server, ctx.namespace) {
            for host in hosts {
                if !merged.insert((host.clone(), vs.namespace.clone(), vs.name.clone())) {
                    continue;
                }
                let routes = virtual_service_routes(
                    ctx.scope,
                    vs,
                    server_port,
                    ctx.labels,
                    binding,
                    warnings,
                );
                let vhost = vhosts.entry(host.clone()).or_insert_with(|| VirtualHost {
                    name: format!("{host}:{server_port}"),
                    domains: vec![host.clone()],
                    require_tls: if redirect {
                        virtual_host::TlsRequirementType::All as i32
                    } else {
                        virtual_host::TlsRequirementType::None as i32
                    },
                    ..Default::default()
                });
                if !routes.is_empty() && vhost.routes.last().is_some_and(is_catch_all) {
                    warnings.push(format!(
                        "VirtualService {}/{}: its routes for {host} on gateway port {port} come \
                         after another VirtualService's catch-all route: never reached",
                        vs.namespace, vs.name
                    ));
                }
                vhost.routes.extend(routes);
            }
        }
    }
    // A server that redirects to HTTPS does so for each of its hosts, whether or not a
    // VirtualService routes it (Istio's gateway route builder adds a virtual host that
    // only redirects).
    for server in servers {
        let s = server.server();
        if !s.tls.as_ref().is_some_and(|t| t.https_redirect) {
            continue;
        }
        let server_port = s.port.as_ref().map_or(port, |p| p.number);
        for host in &s.hosts {
            let host = host.split_once('/').map_or(host.as_str(), |(_, h)| h);
            let host = host.to_ascii_lowercase();
            let vhost = vhosts.entry(host.clone()).or_insert_with(|| VirtualHost {
                name: format!("{host}:{server_port}"),
                domains: vec![host.clone()],
                ..Default::default()
            });
            vhost.require_tls = virtual_host::TlsRequirementType::All as i32;
        }
    }
    let mut virtual_hosts: Vec<VirtualHost> = vhosts.into_values().collect();
    if virtual_hosts.is_empty() {
        virtual_hosts.push(blackhole(port));
    }
    RouteConfiguration {
        name,
        virtual_hosts,
        validate_clusters: Some(BoolValue { value: false }),
        ignore_port_in_host_matching: true,
        ..Default::default()
    }
}

/// Istio's answer on a gateway port no VirtualService routes: 404 for every request.
fn blackhole(port: u32) -> VirtualHost {
    VirtualHost {
        name: format!("blackhole:{port}"),
        domains: vec!["*".into()],
        routes: vec![Route {
            name: "default".into(),
            r#match: Some(RouteMatch {
                path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
                ..Default::default()
            }),
            action: Some(route::Action::DirectResponse(DirectResponseAction {
                status: 404,
                ..Default::default()
            })),
            ..Default::default()
        }],
        ..Default::default()
    }
}
