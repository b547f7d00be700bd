//! Config → mesh model, one namespace at a time (I/O-free).
//!
//! Everything a namespace's chunks hold is derived from that namespace's objects only:
//! services (Kubernetes Services and ServiceEntries, merged across clusters by hostname),
//! their endpoints (EndpointSlices, else Endpoints, else selected Pods; WorkloadEntries;
//! ServiceEntry endpoints) and its routing config with short names resolved. So a change
//! in namespace N rebuilds only N's chunks, and content hashing drops what did not move.

mod endpoints;
mod routing;
mod services;

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

/// Builds one namespace's chunks.
pub fn build_namespace(namespace: &str, objects: &NamespaceObjects<'_>) -> NamespaceBuild {
    let sourced = services::build(namespace, objects);
    let endpoints = sourced
        .iter()
        .map(|s| endpoints::build(s, objects))
        .collect();
    let mut config = routing::build(namespace, objects);
    config.services = sourced.into_iter().map(|s| s.service).collect();
    NamespaceBuild { config, endpoints }
}

#[cfg(test)]
mod tests;
