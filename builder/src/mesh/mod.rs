//! Config → mesh model, one namespace at a time (I/O-free).
//!
//! Everything a namespace's chunks hold is derived from that namespace's objects only:
//! services (Kubernetes Services and ServiceEntries, merged across clusters by hostname),
//! their endpoints (EndpointSlices, else Endpoints, else selected Pods; plus selected
//! WorkloadEntries, their WorkloadGroup applied; ServiceEntry endpoints) and its routing config with short names resolved. So a change
//! in namespace N rebuilds only N's chunks, and content hashing drops what did not move.

mod endpoints;
mod gateways;
mod routing;
mod services;
mod workloads;

use shoal_proto::config::{Config, Kind};
use shoal_proto::model::{NamespaceConfig, ServiceEndpoints};
use std::collections::BTreeMap;

pub use routing::dangling_subsets;

/// The objects of one namespace, from every cluster, by kind.
#[derive(Default, Debug)]
pub struct NamespaceObjects<'a> {
    pub by_kind: BTreeMap<Kind, Vec<&'a Config>>,
}

impl<'a> NamespaceObjects<'a> {
    pub fn push(&mut self, config: &'a Config) {
        self.by_kind.entry(config.kind()).or_default().push(config);
    }

    pub fn of(&self, kind: Kind) -> &[&'a Config] {
        self.by_kind.get(&kind).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// What one namespace contributes to a snapshot.
#[derive(Debug, PartialEq)]
pub struct NamespaceBuild {
    pub config: NamespaceConfig,
    pub endpoints: Vec<ServiceEndpoints>,
}

/// What a kind's objects feed in a namespace's build: a change to one kind can only
/// change what it feeds (and what depends on that).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feeds {
    /// Services, and so the endpoints found for them (Namespace objects feed nothing in
    /// a namespace, and are counted here to be safe).
    Services,
    /// Endpoints only.
    Endpoints,
    /// The namespace's routing config only (security policies too, which it ignores
    /// for now: Shoal does not enforce them yet).
    Routing,
}

impl Feeds {
    pub fn of(kind: Kind) -> Feeds {
        match kind {
            Kind::Service | Kind::ServiceEntry | Kind::Namespace => Feeds::Services,
            Kind::Pod
            | Kind::EndpointSlice
            | Kind::Endpoints
            | Kind::WorkloadEntry
            | Kind::WorkloadGroup => Feeds::Endpoints,
            Kind::VirtualService
            | Kind::DestinationRule
            | Kind::Sidecar
            | Kind::Gateway
            | Kind::Secret
            | Kind::MeshConfig
            | Kind::PeerAuthentication
            | Kind::AuthorizationPolicy
            | Kind::RequestAuthentication => Feeds::Routing,
        }
    }
}

/// Builds one namespace's chunks.
pub fn build_namespace(namespace: &str, objects: &NamespaceObjects<'_>) -> NamespaceBuild {
    let sourced = services::build(namespace, objects);
    let endpoints = endpoints_of(&sourced, objects);
    let mut config = routing::build(namespace, objects);
    config.services = sourced.into_iter().map(|s| s.service).collect();
    config.network_gateways = gateways::build(objects);
    NamespaceBuild { config, endpoints }
}

/// One namespace's endpoints alone: what [`build_namespace`] returns as `endpoints`.
pub fn build_endpoints(namespace: &str, objects: &NamespaceObjects<'_>) -> Vec<ServiceEndpoints> {
    endpoints_of(&services::build(namespace, objects), objects)
}

/// One namespace's routing config alone: what [`build_namespace`] returns as `config`,
/// without its services and network gateways.
pub fn build_routing(namespace: &str, objects: &NamespaceObjects<'_>) -> NamespaceConfig {
    routing::build(namespace, objects)
}

fn endpoints_of(
    sourced: &[services::SourcedService<'_>],
    objects: &NamespaceObjects<'_>,
) -> Vec<ServiceEndpoints> {
    let index = endpoints::EndpointIndex::new(objects);
    sourced
        .iter()
        .map(|s| endpoints::build(s, objects, &index))
        .collect()
}

#[cfg(test)]
mod tests;
