//! The generators for routers (ingress and egress gateways): LDS and RDS from the
//! Gateways that select the router, SDS from its namespace's TLS Secrets. Clusters and
//! endpoints are a sidecar's (every service the router's scope sees), as in Istio, plus
//! an east-west gateway's SNI-DNAT clusters.
//!
//! ```text
//!  LDS  listeners.rs  per (scope, generation, router labels)
//!  RDS  routes.rs     per (scope, generation, router labels)
//!  SDS  secrets.rs    per request (a router asks for a few, by name)
//!  CDS  sni_dnat.rs   the sidecar's, and per (scope, generation, router labels) the
//!                     AUTO_PASSTHROUGH servers' SNI-DNAT clusters
//!  EDS  sni_dnat.rs   the sidecar's, and per (SNI-DNAT cluster, network) the
//!                     assignment of its service's endpoints on the router's network
//! ```

mod listeners;
mod routes;
mod row;
mod secrets;
mod sni_dnat;

use super::GeneratorConfig;
use super::sidecar::SidecarRows;
use super::table::{GeneratorTable, ResourceType};
use super::warnings::Warnings;
use crate::proxy::ProxyKind;
use shoal_proto::push_context::{GatewayPorts, SidecarScope};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Registers the router rows for LDS, RDS and SDS, and for CDS and EDS the sidecar's
/// rows with the SNI-DNAT clusters added.
pub fn register(table: &mut GeneratorTable, config: &GeneratorConfig, sidecar: SidecarRows) {
    let sni_dnat = Arc::new(sni_dnat::SniDnatClusters::new(config));
    table.register(
        ProxyKind::Router,
        ResourceType::Cluster,
        Arc::new(sni_dnat::RouterClusters::new(
            sidecar.clusters,
            sni_dnat.clone(),
        )),
    );
    table.register(
        ProxyKind::Router,
        ResourceType::Endpoint,
        Arc::new(sni_dnat::RouterEndpoints::new(
            config,
            sidecar.endpoints,
            sni_dnat,
        )),
    );
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
