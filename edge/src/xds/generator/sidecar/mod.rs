//! The generators for Envoy sidecars (and, until gateways have their own, routers and
//! proxyless gRPC clients): CDS, EDS, LDS and RDS cut by the proxy's SidecarScope.
//!
//! ```text
//!  CDS  clusters.rs   per (scope, generation, captured?), and with ──┐
//!                     inbound clusters per workload ports            │
//!  EDS  endpoints.rs  per (cluster, endpoint chunk, proxy view),     │ encoded once,
//!                     and per scope the sorted list of them          │ shared as Arc
//!  LDS  listeners.rs  per (scope, generation, mode, bound ip,        │
//!                     workload ports)                                │
//!  RDS  routes.rs     per (scope, generation[, labels])            ──┘
//! ```

mod clusters;
mod endpoints;
mod listeners;
mod routes;

use super::super::XdsResource;
use super::GeneratorConfig;
use super::table::{GeneratorTable, ResourceGenerator, ResourceType};
use super::warnings::Warnings;
use crate::proxy::ProxyKind;
use shoal_proto::model::ServiceEndpoints;
use shoal_proto::push_context::SidecarScope;
use std::sync::Arc;

/// The sidecar CDS and EDS generators, for other kinds to build their rows on.
pub struct SidecarRows {
    pub clusters: Arc<dyn ResourceGenerator>,
    pub endpoints: Arc<dyn ResourceGenerator>,
}

/// Registers the sidecar generators for `kinds`, which share their caches.
pub fn register(
    table: &mut GeneratorTable,
    config: &GeneratorConfig,
    kinds: &[ProxyKind],
) -> SidecarRows {
    let warnings = Arc::new(Warnings::default());
    let clusters = Arc::new(clusters::SidecarClusters::new(config));
    let endpoints = Arc::new(endpoints::SidecarEndpoints::new(config, clusters.clone()));
    let listeners = Arc::new(listeners::SidecarListeners::new(config));
    let routes = Arc::new(routes::SidecarRoutes::new(config, warnings));
    for &kind in kinds {
        table.register(kind, ResourceType::Cluster, clusters.clone());
        table.register(kind, ResourceType::Endpoint, endpoints.clone());
        table.register(kind, ResourceType::Listener, listeners.clone());
        table.register(kind, ResourceType::Route, routes.clone());
    }
    SidecarRows {
        clusters,
        endpoints,
    }
}

type Resources = Arc<Vec<Arc<XdsResource>>>;

/// (scope id, index generation): what a scope's content is a function of.
type ScopeKey = (String, u64);

fn scope_key(scope: &SidecarScope) -> ScopeKey {
    (scope.id.clone(), scope.generation)
}

fn same_chunk(a: Option<&Arc<ServiceEndpoints>>, b: Option<&Arc<ServiceEndpoints>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}
