//! The entry point of xDS generation: finds the generator for a proxy's kind and the
//! requested type in the [`table`], and hands it the proxy's scope.

mod grpc;
mod router;
mod sidecar;
mod table;
mod warnings;

use super::XdsResource;
use super::cache::{CacheStats, EncodedCache};
use super::clusters::ClusterDefaults;
use super::security::jwt::keys::JwksStore;
use crate::proxy::{Proxy, ProxyKind};
use shoal_proto::push_context::PushContext;
use std::sync::Arc;
use table::{GeneratorTable, Request, ResourceType};

#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("unsupported resource type {0}")]
    UnsupportedType(String),
    #[error("{resource}: {reason}")]
    Invalid { resource: String, reason: String },
}

/// Generation defaults and cache bounds.
#[derive(Clone, Debug, PartialEq)]
pub struct GeneratorConfig {
    pub clusters: ClusterDefaults,
    /// Entries in each per-scope cache (CDS, LDS, RDS): scopes × generations kept.
    pub scope_cache_capacity: usize,
    /// Entries in the EDS cache: one per cluster (and service namespace).
    pub endpoint_cache_capacity: usize,
    /// Encoded lists of resources kept for streams to share: one per distinct response
    /// body (scope × type × what changed) of the snapshots in flight.
    pub encoded_cache_capacity: usize,
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        GeneratorConfig {
            clusters: ClusterDefaults::default(),
            scope_cache_capacity: 1024,
            endpoint_cache_capacity: 65_536,
            encoded_cache_capacity: 4096,
        }
    }
}

/// Generates xDS resources, caching what is shared between proxies.
pub struct Generator {
    table: GeneratorTable,
    /// The keys of RequestAuthentications' `jwksUri`s, filled by the edge's refresher.
    jwks: Arc<JwksStore>,
    /// Response bodies, encoded once for every stream that sends them.
    encoded: EncodedCache,
}

impl Default for Generator {
    fn default() -> Self {
        Self::new()
    }
}

impl Generator {
    pub fn new() -> Self {
        Self::with_config(GeneratorConfig::default())
    }

    pub fn with_config(config: GeneratorConfig) -> Self {
        Self::with_jwks(config, Arc::default())
    }

    /// Generates with the keys in `jwks` (which `crate::jwks` keeps fetched).
    pub fn with_jwks(config: GeneratorConfig, jwks: Arc<JwksStore>) -> Self {
        let mut table = GeneratorTable::default();
        // Every kind starts from the sidecar rows. Routers replace LDS and RDS, add
        // SDS, and add their SNI-DNAT clusters and endpoints to a sidecar's; proxyless
        // gRPC clients replace LDS, RDS and CDS (and keep the sidecars' EDS: same
        // cluster names, same assignments).
        let sidecar_rows = sidecar::register(&mut table, &config, &ProxyKind::ALL);
        router::register(&mut table, &config, sidecar_rows);
        grpc::register(&mut table, &config);
        Generator {
            table,
            jwks,
            encoded: EncodedCache::new(config.encoded_cache_capacity),
        }
    }

    /// `resources` encoded by `encode` (one of the transport's encodings, told apart by
    /// `kind`), shared with every other stream that sends the same resources.
    pub fn encoded(
        &self,
        kind: u64,
        resources: &[Arc<XdsResource>],
        encode: impl FnOnce(&[Arc<XdsResource>]) -> bytes::Bytes,
    ) -> bytes::Bytes {
        self.encoded.get_or_encode(kind, resources, encode)
    }

    /// The JWKS store generation reads.
    pub fn jwks(&self) -> &Arc<JwksStore> {
        &self.jwks
    }

    /// Hits, misses and sizes of the caches, for metrics, summed over proxy kinds.
    pub fn cache_stats(&self) -> CacheStats {
        CacheStats {
            clusters: self.table.stats(ResourceType::Cluster),
            endpoints: self.table.stats(ResourceType::Endpoint),
            listeners: self.table.stats(ResourceType::Listener),
            routes: self.table.stats(ResourceType::Route),
            encoded: self.encoded.stats(),
        }
    }

    /// The resources of `type_url` for `proxy` in `push`. `names` empty means all
    /// (wildcard); otherwise only those names that exist, in the order given.
    pub fn generate(
        &self,
        type_url: &str,
        proxy: &Proxy,
        push: &PushContext,
        names: &[String],
    ) -> Result<Vec<Arc<XdsResource>>, GenerateError> {
        let generator = ResourceType::from_url(type_url)
            .and_then(|t| self.table.get(proxy.kind, t))
            .ok_or_else(|| GenerateError::UnsupportedType(type_url.to_string()))?;
        let scope = push.sidecar_scope(&proxy.namespace, &proxy.labels);
        let request = Request {
            proxy,
            push,
            scope: &scope,
            jwks: &self.jwks,
        };
        Ok(generator.generate(&request, names))
    }
}

#[cfg(test)]
mod tests;
