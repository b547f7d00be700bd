//! The mesh model the builder derives from config: services (from Kubernetes Services
//! and ServiceEntries, merged across clusters by hostname and namespace), their
//! endpoints, and the routing config of each namespace. Snapshots carry these types.

mod service;

pub use service::{
    Endpoint, ExportTo, NamedConfig, NamespaceConfig, NetworkGateway, Protocol, Resolution,
    Service, ServiceEndpoints, ServiceKey, ServicePort, export_visible,
};

/// The default root namespace (whose Sidecar and config apply mesh-wide): the mesh
/// config's `rootNamespace` overrides it.
pub const ROOT_NAMESPACE: &str = "istio-system";
/// The cluster domain suffix of Kubernetes Service hostnames.
pub const DOMAIN_SUFFIX: &str = "svc.cluster.local";

/// Istio's short-name resolution: `reviews` in namespace `bookinfo` is
/// `reviews.bookinfo.svc.cluster.local`; names with a dot and wildcards stay as written.
pub fn resolve_short_name(host: &str, namespace: &str) -> String {
    if host.contains('.') || host.contains('*') {
        host.to_string()
    } else {
        format!("{host}.{namespace}.{DOMAIN_SUFFIX}")
    }
}

/// Whether `pattern` (exact, `*`, or `*.suffix`) matches `host`.
pub fn host_matches(pattern: &str, host: &str) -> bool {
    if pattern == "*" || pattern == host {
        return true;
    }
    match pattern.strip_prefix('*') {
        Some(suffix) => host.ends_with(suffix) && host.len() > suffix.len(),
        None => false,
    }
}

/// Whether two host patterns can match a common host (either is more general).
pub fn hosts_intersect(a: &str, b: &str) -> bool {
    host_matches(a, b) || host_matches(b, a)
}
