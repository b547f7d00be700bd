//! The generators for routers (ingress and egress gateways): LDS and RDS from the
//! Gateways that select the router, SDS from its namespace's TLS Secrets. Clusters and
//! endpoints are a sidecar's (every service the router's scope sees), as in Istio.
//!
//! ```text
//!  LDS  listeners.rs  per (scope, generation, router labels)
//!  RDS  routes.rs     per (scope, generation, router labels)
//!  SDS  secrets.rs    per request (a router asks for a few, by name)
//! ```

mod listeners;
mod routes;
mod row;
mod secrets;

use super::GeneratorConfig;
use super::table::{GeneratorTable, ResourceType};
use super::warnings::Warnings;
use crate::proxy::ProxyKind;
use shoal_proto::push_context::{GatewayPorts, SidecarScope};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Registers the router rows for LDS, RDS and SDS (CDS and EDS stay the sidecar's).
pub fn register(table: &mut GeneratorTable, config: &GeneratorConfig) {
    let warnings = Arc::new(Warnings::default());
    table.register(
        ProxyKind::Router,
        ResourceType::Listener,
        Arc::new(row::RouterRow::new(
            config,
            warnings.clone(),
            listeners::build,
        )),
    );
    table.register(
        ProxyKind::Router,
        ResourceType::Route,
        Arc::new(row::RouterRow::new(config, warnings, routes::build)),
    );
    table.register(
        ProxyKind::Router,
        ResourceType::Secret,
        Arc::new(secrets::RouterSecrets::default()),
    );
}

/// What a router's listeners and routes are a function of: its scope (at an index
/// generation, which also fixes the Gateways and credentials), its labels (which
/// Gateways select it) and its gateway port translation (the ports of the Services in
/// front of it), and the fetched JWKS its RequestAuthentications use (a version).
type RouterKey = (String, u64, BTreeMap<String, String>, GatewayPorts, u64);

fn router_key(
    scope: &SidecarScope,
    labels: &BTreeMap<String, String>,
    ports: GatewayPorts,
    jwks_version: u64,
) -> RouterKey {
    (
        scope.id.clone(),
        scope.generation,
        labels.clone(),
        ports,
        jwks_version,
    )
}
