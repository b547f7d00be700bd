//! The type URLs of the xDS resource types Shoal serves: the four a sidecar subscribes
//! to, and the TLS secrets (SDS) a gateway asks for.

pub const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub const ENDPOINT: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
pub const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
pub const ROUTE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
pub const SECRET: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

/// Push order for make-before-break: clusters before their endpoints, listeners
/// before their routes and the secrets their TLS filter chains name.
pub const PUSH_ORDER: [&str; 5] = [CLUSTER, ENDPOINT, LISTENER, ROUTE, SECRET];

/// CDS and LDS are wildcard (state of the world); EDS and RDS are named.
pub fn is_wildcard(type_url: &str) -> bool {
    type_url == CLUSTER || type_url == LISTENER
}
