//! LDS for proxyless gRPC clients: per target `host:port`, a listener of that name whose
//! `api_listener` is an HTTP connection manager taking its routes over RDS from
//! `outbound|<port>||<service FQDN>`. Servers' listeners (`xds.istio.io/grpc/lds/
//! inbound/<ip>:<port>`) are [`super::servers`]', cached apart: they depend on the
//! workload (its ports and security policies), the clients' only on the scope.

use super::super::super::XdsResource;
use super::super::super::cache::{TypeCache, TypeStats};
use super::super::super::routes::FAULT_FILTER;
use super::super::super::util::{
    WILDCARD_IP, address, ads_config_source, any, cluster_name, resource, sort_by_name,
};
use super::super::GeneratorConfig;
use super::super::table::{Request, ResourceGenerator};
use super::names::{SERVER_LISTENER_PREFIX, host_port, resolve};
use super::security::server::ServerSecurity;
use super::servers::{self, is_server_listener};
use super::{NamesKey, Resources, names_key, warn_all};
use crate::xds::security::outbound::has_mesh_identity;
use crate::xds::security::{PolicyKey, ProxyPolicies, mesh_identity};
use envoy_types::pb::envoy::config::listener::v3::{ApiListener, Listener};
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::HttpFault;
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds, http_connection_manager, http_filter,
};
use shoal_proto::model::Service;
use shoal_proto::push_context::InboundPort;
use shoal_proto::push_context::SidecarScope;
use std::sync::Arc;

/// (scope and names, the workload's ports, its policies, labelled `tlsMode: istio`).
type ServerKey = (NamesKey, Arc<[InboundPort]>, PolicyKey, bool);

pub(super) struct GrpcListeners {
    cache: TypeCache<NamesKey, Resources>,
    servers: TypeCache<ServerKey, Resources>,
}

impl GrpcListeners {
    pub fn new(config: &GeneratorConfig) -> Self {
        GrpcListeners {
            cache: TypeCache::new(config.scope_cache_capacity),
            servers: TypeCache::new(config.scope_cache_capacity),
        }
    }

    fn clients(&self, req: &Request<'_>, names: &[String]) -> Resources {
        self.cache.get_or_build(
            names_key(req.scope, names),
            |_| true,
            || Arc::new(build(req.scope, names)),
        )
    }

    /// The server listeners `names` ask for.
    fn servers(&self, req: &Request<'_>, names: &[String]) -> Resources {
        let proxy = req.proxy;
        let inbound = req.push.service_instances().inbound_ports(&proxy.ip);
        let policies = ProxyPolicies::of(
            &req.push.index().security,
            &proxy.namespace,
            &proxy.labels,
            mesh_identity(proxy),
        );
        let key = (
            names_key(req.scope, names),
            inbound.clone(),
            policies.key(req.jwks),
            has_mesh_identity(&proxy.labels),
        );
        self.servers.get_or_build(
            key,
            |_| true,
            || {
                let mut warnings = Vec::new();
                let security = ServerSecurity::new(&policies, proxy, &mut warnings);
                let built = names
                    .iter()
                    .filter_map(|name| {
                        let l =
                            servers::listener(name, &inbound, &security, &proxy.id, &mut warnings)?;
                        Some(resource(name.clone(), &l))
                    })
                    .collect();
                warnings.sort();
                warnings.dedup();
                warn_all(&warnings);
                Arc::new(built)
            },
        )
    }
}

impl ResourceGenerator for GrpcListeners {
    fn generate(&self, req: &Request<'_>, names: &[String]) -> Vec<Arc<XdsResource>> {
        let (server_names, client_names): (Vec<String>, Vec<String>) =
            names.iter().cloned().partition(|n| is_server_listener(n));
        if server_names.is_empty() {
            return self.clients(req, names).to_vec();
        }
        let servers = self.servers(req, &server_names);
        let clients = if client_names.is_empty() {
            Arc::default()
        } else {
            self.clients(req, &client_names)
        };
        // In the order asked.
        names
            .iter()
            .filter_map(|n| clients.iter().chain(servers.iter()).find(|r| r.name == *n))
            .cloned()
            .collect()
    }

    fn stats(&self) -> TypeStats {
        let (clients, servers) = (self.cache.stats(), self.servers.stats());
        TypeStats {
            hits: clients.hits + servers.hits,
            misses: clients.misses + servers.misses,
            entries: clients.entries + servers.entries,
        }
    }
}

/// The listeners `names` ask for, in their order; every service port of the scope by
/// its FQDN, sorted, when none is named.
fn build(scope: &SidecarScope, names: &[String]) -> Vec<Arc<XdsResource>> {
    if names.is_empty() {
        let all = scope
            .services
            .iter()
            .flat_map(|svc| {
                svc.ports
                    .iter()
                    .filter(|p| p.protocol.is_proxied())
                    .map(move |p| listener(format!("{}:{}", svc.hostname, p.port), svc, p.port))
            })
            .collect();
        return sort_by_name(all, |l: &Listener| &l.name)
            .iter()
            .map(|l| resource(l.name.clone(), l))
            .collect();
    }
    names
        .iter()
        .filter_map(|name| {
            let found = target(scope, name);
            if found.is_none() {
                tracing::debug!(
                    listener = name.as_str(),
                    scope = scope.id.as_str(),
                    "proxyless gRPC listener names no service port visible to the client"
                );
            }
            let (svc, port) = found?;
            Some(resource(name.clone(), &listener(name.clone(), svc, port)))
        })
        .collect()
}

/// The service and port a client's listener name targets (none for a server's).
fn target<'a>(scope: &'a SidecarScope, name: &str) -> Option<(&'a Service, u32)> {
    if name.starts_with(SERVER_LISTENER_PREFIX) {
        return None;
    }
    let (host, port) = host_port(name)?;
    let svc = resolve(scope, host)?;
    svc.ports
        .iter()
        .any(|p| p.port == port && p.protocol.is_proxied())
        .then_some((&**svc, port))
}

/// A client-side listener: gRPC reads only its `api_listener`; the address is the
/// service's, as Istio gives it.
fn listener(name: String, svc: &Service, port: u32) -> Listener {
    let vip = svc
        .addresses
        .iter()
        .find(|a| !a.is_empty() && *a != WILDCARD_IP)
        .map_or(WILDCARD_IP, String::as_str);
    let hcm = HttpConnectionManager {
        route_specifier: Some(http_connection_manager::RouteSpecifier::Rds(Rds {
            config_source: Some(ads_config_source()),
            route_config_name: cluster_name(port, "", &svc.hostname),
        })),
        // gRPC implements these two HTTP filters (gRFC A33 fault injection, and the
        // router, which must be last).
        http_filters: vec![
            HttpFilter {
                name: FAULT_FILTER.into(),
                config_type: Some(http_filter::ConfigType::TypedConfig(any(
                    &HttpFault::default(),
                ))),
                ..Default::default()
            },
            HttpFilter {
                name: "envoy.filters.http.router".into(),
                config_type: Some(http_filter::ConfigType::TypedConfig(
                    any(&Router::default()),
                )),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    Listener {
        name,
        address: Some(address(vip, port)),
        api_listener: Some(ApiListener {
            api_listener: Some(any(&hcm)),
        }),
        ..Default::default()
    }
}
