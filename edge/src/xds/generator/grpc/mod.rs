//! The generators for proxyless gRPC clients (node metadata `GENERATOR: grpc`), as
//! Istio's `grpcgen` serves them. A gRPC client asks for exactly what its channels use,
//! by name, and gets only that:
//!
//! ```text
//!  xds:///reviews.shop.svc.cluster.local:9080
//!   LDS  "reviews.shop.svc.cluster.local:9080"   api_listener: HCM, RDS ─┐  listeners.rs
//!   RDS  "outbound|9080||reviews.shop.svc.cluster.local"  ◄─────────────┘  routes.rs
//!          one virtual host: the VirtualService routes, as gRPC takes them
//!   CDS  "outbound|9080|v1|reviews.shop.svc.cluster.local" (EDS over ADS)  clusters.rs
//!   EDS  the sidecars' assignments, for the same cluster names             (sidecar row)
//!
//!  xds.NewGRPCServer / grpc.server(xds=True) on <ip>:<port>
//!   LDS  "xds.istio.io/grpc/lds/inbound/<ip>:<port>"  one chain, inline route  servers.rs
//! ```
//!
//! Security (mTLS by certificate providers, PeerAuthentication on servers,
//! AuthorizationPolicy as RBAC) is [`security`]'s, behind the sidecar's hooks.
//!
//! Each type is cached per (scope, generation, the names asked): the clients of one
//! workload ask for the same targets, so they share the encoded resources.

mod clusters;
mod listeners;
mod names;
mod routes;
mod security;
mod servers;

use super::super::XdsResource;
use super::GeneratorConfig;
use super::table::{GeneratorTable, ResourceType};
use crate::proxy::ProxyKind;
use shoal_proto::push_context::SidecarScope;
use std::sync::Arc;

/// Serves proxyless gRPC clients' LDS, RDS and CDS. Their EDS stays with the row already
/// registered for them (the sidecars'): the cluster names, and so the assignments, are
/// the same.
pub fn register(table: &mut GeneratorTable, config: &GeneratorConfig) {
    let kind = ProxyKind::ProxylessGrpc;
    table.register(
        kind,
        ResourceType::Listener,
        Arc::new(listeners::GrpcListeners::new(config)),
    );
    table.register(
        kind,
        ResourceType::Route,
        Arc::new(routes::GrpcRoutes::new(config)),
    );
    table.register(
        kind,
        ResourceType::Cluster,
        Arc::new(clusters::GrpcClusters::new(config)),
    );
}

type Resources = Arc<Vec<Arc<XdsResource>>>;

/// (scope id, index generation, the names asked): what an answer is a function of.
type NamesKey = (String, u64, Vec<String>);

fn names_key(scope: &SidecarScope, names: &[String]) -> NamesKey {
    (scope.id.clone(), scope.generation, names.to_vec())
}

/// Logs what could not be generated as asked. Called when an answer is built, so once
/// per (scope generation, names), not once per request.
fn warn_all(warnings: &[String]) {
    for w in warnings {
        tracing::warn!("{w}");
    }
}

#[cfg(test)]
mod tests;
