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
use super::table::{GeneratorTable, ResourceType};
use crate::proxy::ProxyKind;
use shoal_proto::model::ServiceEndpoints;
use shoal_proto::push_context::SidecarScope;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Registers the sidecar generators for `kinds`, which share their caches.
pub fn register(table: &mut GeneratorTable, config: &GeneratorConfig, kinds: &[ProxyKind]) {
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

/// Warnings already logged, so each is logged once.
#[derive(Default)]
struct Warnings(Mutex<HashSet<String>>);

impl Warnings {
    fn warn_once(&self, warnings: &[String]) {
        let mut warned = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded: forgetting old warnings only means logging them again.
        if warned.len() > 10_000 {
            warned.clear();
        }
        for w in warnings {
            if warned.insert(w.clone()) {
                tracing::warn!("{w}");
            }
        }
    }
}
