//! RDS: one `RouteConfiguration` per outbound HTTP port, named after the port, as Istio's
//! sidecar route builder makes it.
//!
//! ```text
//! "9080" ─┬─ reviews.shop.svc.cluster.local:9080   domains: FQDN, short forms, VIPs (± :port)
//!         │     routes: the first VirtualService for the host (else one default route)
//!         ├─ ratings.shop.svc.cluster.local:9080
//!         └─ allow_any (* → PassthroughCluster)   or block_all (* → 502) for REGISTRY_ONLY
//! ```

mod cors;
mod fault;
mod headers;
mod matching;
mod mirror;
mod retry;
mod translate;
mod vs_hosts;

use super::listeners::{fallthrough_cluster, http_ports};
use super::util::{cluster_name, duration, sort_by_name};
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, route,
    route_action, route_match,
};
use envoy_types::pb::google::protobuf::BoolValue;
use shoal_proto::config::istio::VirtualService;
use shoal_proto::model::{DOMAIN_SUFFIX, NamedConfig, Service, host_matches};
use shoal_proto::push_context::policy;
use shoal_proto::push_context::{SidecarScope, TrafficMode};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

pub use cors::CORS_FILTER;
pub use fault::FAULT_FILTER;
pub use retry::{DEFAULT_RETRY_ON, retry_policy};
pub use translate::{Binding, is_catch_all, virtual_service_routes};

/// The route configurations of a scope, and what deserves an operator's attention.
#[derive(Debug, Default)]
pub struct ScopeRoutes {
    /// Sorted by name.
    pub configs: Vec<RouteConfiguration>,
    /// Problems that do not stop generation (e.g. a subset no DestinationRule defines).
    pub warnings: Vec<String>,
}

/// Whether any visible VirtualService routes by the client's labels: only then do the
/// routes of a scope differ between its proxies.
pub fn uses_source_labels(scope: &SidecarScope) -> bool {
    scope
        .virtual_services
        .iter()
        .chain(scope.delegates())
        .any(|vs| {
            vs.spec
                .http
                .iter()
                .flat_map(|r| r.matches.iter())
                .any(|m| !m.source_labels.is_empty())
        })
}

/// Every route configuration of `scope`, for proxies with `labels`.
pub fn build(scope: &SidecarScope, labels: &BTreeMap<String, String>) -> ScopeRoutes {
    let mut out = ScopeRoutes::default();
    let vs_index = VsIndex::new(scope);
    let ports = http_ports(scope);
    let extra = vs_hosts::non_service_hosts(scope, &ports, |h| vs_index.lookup(h));
    // One pass over the services, not one per port: scopes can hold thousands.
    let mut by_port: BTreeMap<u32, Vec<&Service>> =
        ports.into_iter().map(|p| (p, Vec::new())).collect();
    for svc in &scope.services {
        for p in &svc.ports {
            if let Some(services) = by_port.get_mut(&p.port) {
                services.push(svc);
            }
        }
    }
    for (port, services) in by_port {
        let config = route_config(
            scope,
            &vs_index,
            port,
            &services,
            &extra,
            labels,
            &mut out.warnings,
        );
        out.configs.push(config);
    }
    out.configs = sort_by_name(std::mem::take(&mut out.configs), |c| &c.name);
    out.warnings.sort();
    out.warnings.dedup();
    out
}

/// The configuration for `port`, with a virtual host for each of `services` (those of
/// the scope that have the port) and for each VirtualService host in `extra` served on
/// the port.
fn route_config(
    scope: &SidecarScope,
    vs_index: &VsIndex<'_>,
    port: u32,
    services: &[&Service],
    extra: &[vs_hosts::VsHosts<'_>],
    labels: &BTreeMap<String, String>,
    warnings: &mut Vec<String>,
) -> RouteConfiguration {
    // Envoy rejects a configuration that lists a domain twice. Every FQDN is claimed
    // before any short form or VIP, so a short form never shadows a real host name.
    let mut taken: HashSet<String> = services
        .iter()
        .flat_map(|s| [s.hostname.clone(), format!("{}:{port}", s.hostname)])
        .collect();
    let mut vhosts: Vec<VirtualHost> = services
        .iter()
        .map(|svc| {
            let mut domains = vec![svc.hostname.clone(), format!("{}:{port}", svc.hostname)];
            let names = alt_domains(svc, port, &scope.namespace)
                .into_iter()
                .chain(alias_domains(scope, svc, port));
            for d in names {
                if taken.insert(d.clone()) {
                    domains.push(d);
                }
            }
            VirtualHost {
                name: format!("{}:{port}", svc.hostname),
                domains,
                routes: vhost_routes(scope, vs_index, svc, port, labels, warnings),
                ..Default::default()
            }
        })
        .collect();
    for entry in extra.iter().filter(|e| e.on(port)) {
        let routes = translate::virtual_service_routes(
            scope,
            entry.vs,
            port,
            labels,
            Binding::Mesh,
            warnings,
        );
        if routes.is_empty() {
            continue;
        }
        for host in &entry.hosts {
            // A host claimed by a service or an earlier VirtualService keeps its claim.
            let domains: Vec<String> = [host.to_string(), format!("{host}:{port}")]
                .into_iter()
                .filter(|d| taken.insert(d.clone()))
                .collect();
            if domains.is_empty() {
                continue;
            }
            vhosts.push(VirtualHost {
                name: format!("{host}:{port}"),
                domains,
                routes: routes.clone(),
                ..Default::default()
            });
        }
    }
    let mut vhosts = sort_by_name(vhosts, |v| &v.name);
    vhosts.push(catch_all(scope));
    RouteConfiguration {
        name: port.to_string(),
        virtual_hosts: vhosts,
        // Clusters arrive over CDS on their own schedule; a route naming a cluster that
        // is not (yet) there answers 503 instead of rejecting the whole configuration.
        validate_clusters: Some(BoolValue { value: false }),
        ignore_port_in_host_matching: true,
        ..Default::default()
    }
}

/// The virtual host of one service on `port`, alone in a configuration (as proxyless
/// gRPC clients take it): every name of the service, and its routes.
pub(crate) fn service_virtual_host(
    scope: &SidecarScope,
    svc: &Service,
    port: u32,
    labels: &BTreeMap<String, String>,
    warnings: &mut Vec<String>,
) -> VirtualHost {
    let mut domains = vec![svc.hostname.clone(), format!("{}:{port}", svc.hostname)];
    domains.extend(alt_domains(svc, port, &scope.namespace));
    domains.extend(alias_domains(scope, svc, port));
    VirtualHost {
        name: format!("{}:{port}", svc.hostname),
        domains,
        routes: vhost_routes(scope, &VsIndex::new(scope), svc, port, labels, warnings),
        ..Default::default()
    }
}

/// `SidecarScope::virtual_service_for` for every service of a scope at once: a scan of
/// every VirtualService per virtual host is quadratic in large meshes.
struct VsIndex<'a> {
    /// Exact hosts, to the position of the first VirtualService naming them.
    exact: HashMap<&'a str, usize>,
    /// VirtualServices with a wildcard host, in scope order.
    wildcard: Vec<(usize, &'a NamedConfig<VirtualService>)>,
    all: &'a [Arc<NamedConfig<VirtualService>>],
}

impl<'a> VsIndex<'a> {
    fn new(scope: &'a SidecarScope) -> Self {
        let mut exact = HashMap::new();
        let mut wildcard = Vec::new();
        for (i, vs) in scope.virtual_services.iter().enumerate() {
            for h in &vs.spec.hosts {
                if h.contains('*') {
                    if wildcard.last().is_none_or(|(j, _)| *j != i) {
                        wildcard.push((i, &**vs));
                    }
                } else {
                    exact.entry(h.as_str()).or_insert(i);
                }
            }
        }
        VsIndex {
            exact,
            wildcard,
            all: &scope.virtual_services,
        }
    }

    /// The first VirtualService, in scope order, with a host matching `hostname`.
    fn lookup(&self, hostname: &str) -> Option<&'a NamedConfig<VirtualService>> {
        let exact = self.exact.get(hostname).copied();
        let wild = self
            .wildcard
            .iter()
            .find(|(_, vs)| vs.spec.hosts.iter().any(|h| host_matches(h, hostname)))
            .map(|(i, _)| *i);
        let first = match (exact, wild) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        Some(&self.all[first])
    }
}

/// The other names a client may use: Kubernetes short forms (the bare name only from the
/// service's own namespace, where DNS search paths resolve it to this service) and VIPs,
/// each with and without the port.
fn alt_domains(svc: &Service, port: u32, proxy_ns: &str) -> Vec<String> {
    let mut names = Vec::new();
    let short = svc
        .hostname
        .strip_suffix(DOMAIN_SUFFIX)
        .and_then(|s| s.strip_suffix('.'))
        .and_then(|s| s.split_once('.'))
        .filter(|(_, ns)| !ns.contains('.'));
    if let Some((name, ns)) = short {
        if ns == proxy_ns {
            names.push(name.to_string());
        }
        names.push(format!("{name}.{ns}"));
        names.push(format!("{name}.{ns}.svc"));
        names.push(format!("{name}.{ns}.svc.cluster"));
    }
    for vip in svc
        .addresses
        .iter()
        .filter(|a| !a.is_empty() && *a != "0.0.0.0")
    {
        // An IPv6 literal is bracketed in a Host header.
        if vip.contains(':') {
            names.push(format!("[{vip}]"));
        } else {
            names.push(vip.clone());
        }
    }
    names
        .into_iter()
        .flat_map(|n| {
            let with_port = format!("{n}:{port}");
            [n, with_port]
        })
        .collect()
}

/// The names of the ExternalName Services aliasing `svc` (Istio routes a call to an
/// alias by the aliased service's virtual host): each hostname and its short forms,
/// with and without the port.
fn alias_domains(scope: &SidecarScope, svc: &Service, port: u32) -> Vec<String> {
    let mut out = Vec::new();
    for alias in scope.aliases_of(&svc.hostname) {
        out.push(alias.hostname.clone());
        out.push(format!("{}:{port}", alias.hostname));
        out.extend(alt_domains(alias, port, &scope.namespace));
    }
    out
}

/// The routes of a service's virtual host: the first VirtualService for the host, when it
/// has routes for this port, else the default route.
fn vhost_routes(
    scope: &SidecarScope,
    vs_index: &VsIndex<'_>,
    svc: &Service,
    port: u32,
    labels: &BTreeMap<String, String>,
    warnings: &mut Vec<String>,
) -> Vec<Route> {
    if let Some(vs) = vs_index.lookup(&svc.hostname) {
        let routes =
            translate::virtual_service_routes(scope, vs, port, labels, Binding::Mesh, warnings);
        if !routes.is_empty() {
            return routes;
        }
    }
    vec![default_route(scope, svc, port)]
}

/// `/` to the service's cluster, with Istio's default retries and no timeout; hashed when
/// the DestinationRule asks for consistent hashing.
pub fn default_route(scope: &SidecarScope, svc: &Service, port: u32) -> Route {
    let rule = scope.destination_rule(&svc.hostname).map(|r| &r.spec);
    let hash = policy::effective(rule, None, port).consistent_hash();
    Route {
        name: "default".into(),
        r#match: Some(prefix_match("/")),
        action: Some(route::Action::Route(RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(cluster_name(
                port,
                "",
                &svc.hostname,
            ))),
            timeout: Some(duration(Duration::ZERO)),
            retry_policy: retry_policy(None, hash.is_some()),
            hash_policy: hash
                .into_iter()
                .filter_map(translate::hash_policy)
                .collect(),
            ..Default::default()
        })),
        ..Default::default()
    }
}

pub fn prefix_match(prefix: &str) -> RouteMatch {
    RouteMatch {
        path_specifier: Some(route_match::PathSpecifier::Prefix(prefix.to_string())),
        ..Default::default()
    }
}

/// The last virtual host: unknown hosts pass through or go to the Sidecar's egress proxy
/// (ALLOW_ANY), or get a 502 (REGISTRY_ONLY).
fn catch_all(scope: &SidecarScope) -> VirtualHost {
    let (name, action) = match scope.outbound_mode {
        TrafficMode::AllowAny => (
            "allow_any",
            route::Action::Route(RouteAction {
                cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(
                    fallthrough_cluster(scope),
                )),
                timeout: Some(duration(Duration::ZERO)),
                ..Default::default()
            }),
        ),
        TrafficMode::RegistryOnly => (
            "block_all",
            route::Action::DirectResponse(DirectResponseAction {
                status: 502,
                ..Default::default()
            }),
        ),
    };
    VirtualHost {
        name: name.into(),
        domains: vec!["*".into()],
        routes: vec![Route {
            name: name.into(),
            r#match: Some(prefix_match("/")),
            action: Some(action),
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
