//! The table of generators: one per (proxy kind, resource type), each with its own cache
//! and cache key. A new kind of proxy or resource is a new row, not a branch inside an
//! existing generator.

use super::super::XdsResource;
use super::super::cache::TypeStats;
use super::super::security::jwt::keys::JwksStore;
use super::super::types;
use crate::proxy::{Proxy, ProxyKind};
use shoal_proto::push_context::{PushContext, SidecarScope};
use std::collections::HashMap;
use std::sync::Arc;

/// The resource types Shoal generates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResourceType {
    Cluster,
    Endpoint,
    Listener,
    Route,
    Secret,
}

impl ResourceType {
    pub fn from_url(type_url: &str) -> Option<ResourceType> {
        match type_url {
            types::CLUSTER => Some(ResourceType::Cluster),
            types::ENDPOINT => Some(ResourceType::Endpoint),
            types::LISTENER => Some(ResourceType::Listener),
            types::ROUTE => Some(ResourceType::Route),
            types::SECRET => Some(ResourceType::Secret),
            _ => None,
        }
    }
}

/// What one generation is for: the proxy, the snapshot, and the proxy's scope in it.
pub struct Request<'a> {
    pub proxy: &'a Proxy,
    pub push: &'a PushContext,
    pub scope: &'a SidecarScope,
    /// The keys the edge fetched for RequestAuthentications' `jwksUri`s.
    pub jwks: &'a JwksStore,
}

/// Generates one resource type for one kind of proxy, caching what proxies share.
pub trait ResourceGenerator: Send + Sync {
    /// `names` empty means all (wildcard), sorted by name; otherwise only those names
    /// that exist, in the order given.
    fn generate(&self, request: &Request<'_>, names: &[String]) -> Vec<Arc<XdsResource>>;

    /// Its cache's counters.
    fn stats(&self) -> TypeStats;
}

#[derive(Default)]
pub struct GeneratorTable {
    rows: HashMap<(ProxyKind, ResourceType), Arc<dyn ResourceGenerator>>,
}

impl GeneratorTable {
    /// Serves `kind`'s `resource` requests with `generator` (one generator may serve
    /// several kinds, sharing its cache).
    pub fn register(
        &mut self,
        kind: ProxyKind,
        resource: ResourceType,
        generator: Arc<dyn ResourceGenerator>,
    ) {
        self.rows.insert((kind, resource), generator);
    }

    pub fn get(&self, kind: ProxyKind, resource: ResourceType) -> Option<&dyn ResourceGenerator> {
        self.rows.get(&(kind, resource)).map(|g| &**g)
    }

    /// The counters of every distinct generator of `resource`, summed.
    pub fn stats(&self, resource: ResourceType) -> TypeStats {
        let mut seen: Vec<*const ()> = Vec::new();
        let mut total = TypeStats::default();
        for ((_, r), generator) in &self.rows {
            let ptr = Arc::as_ptr(generator) as *const ();
            if *r != resource || seen.contains(&ptr) {
                continue;
            }
            seen.push(ptr);
            let s = generator.stats();
            total.hits += s.hits;
            total.misses += s.misses;
            total.entries += s.entries;
        }
        total
    }
}

/// `all` (sorted by name) when `names` is empty, else the named ones that exist, in the
/// order asked.
pub fn select(all: &[Arc<XdsResource>], names: &[String]) -> Vec<Arc<XdsResource>> {
    if names.is_empty() {
        return all.to_vec();
    }
    names
        .iter()
        .filter_map(|n| {
            all.binary_search_by(|r| r.name.as_str().cmp(n))
                .ok()
                .map(|i| all[i].clone())
        })
        .collect()
}
