//! The type URLs of the four xDS resource types a sidecar subscribes to.

pub const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub const ENDPOINT: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
pub const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
pub const ROUTE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

/// Push order for make-before-break: clusters before their endpoints, listeners
/// before their routes.
pub const PUSH_ORDER: [&str; 4] = [CLUSTER, ENDPOINT, LISTENER, ROUTE];

/// CDS and LDS are wildcard (state of the world); EDS and RDS are named.
pub fn is_wildcard(type_url: &str) -> bool {
    type_url == CLUSTER || type_url == LISTENER
}
