//! Incremental snapshot construction (I/O-free): rebuild the dirty namespaces' chunks,
//! keep every other chunk, and say what changed.

use crate::mesh::{self, NamespaceBuild};
use crate::replica::{Dirty, Replica};
use shoal_proto::config::{ConfigKey, Kind};
use shoal_proto::model::{NamespaceConfig, Resolution, ServiceKey};
use shoal_proto::snapshot::{Chunk, ChunkHash, ChunkKey, ChunkRef, Manifest, SnapshotError};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A snapshot ready to write.
#[derive(Debug)]
pub struct Built {
    pub manifest: Manifest,
    /// Chunks this build produced that the previous snapshot did not have.
    pub new_chunks: Vec<(ChunkHash, Arc<Vec<u8>>)>,
    /// Namespace chunks changed or removed: proxies need a full push.
    pub full: bool,
    /// `ServiceEntry ns/hostname` for services whose endpoints (or definition) changed.
    pub services_updated: BTreeSet<ConfigKey>,
    pub namespaces_rebuilt: usize,
    pub warnings: Vec<String>,
}

/// The previous snapshot's chunks, from which the next is built.
#[derive(Default)]
pub struct SnapshotBuilder {
    chunks: BTreeMap<ChunkKey, (ChunkHash, Arc<Vec<u8>>)>,
    namespace_configs: BTreeMap<String, NamespaceConfig>,
    endpoints_by_namespace: BTreeMap<String, BTreeSet<ServiceKey>>,
}

impl SnapshotBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// Every chunk hash of the current snapshot.
    pub fn hashes(&self) -> Vec<ChunkHash> {
        self.chunks.values().map(|(h, _)| h.clone()).collect()
    }

    /// Rebuilds `dirty` from `replica` into snapshot `version`. Returns `None` when no
    /// chunk changed.
    pub fn build(
        &mut self,
        replica: &Replica,
        dirty: Dirty,
        version: u64,
        now_unix_nanos: u64,
    ) -> Result<Option<Built>, SnapshotError> {
        let namespaces: BTreeSet<String> = if dirty.all {
            replica
                .namespaces()
                .cloned()
                .chain(self.namespace_configs.keys().cloned())
                .collect()
        } else {
            dirty.namespaces
        };
        let mut new_chunks = Vec::new();
        let mut full = false;
        let mut services_updated = BTreeSet::new();
        let mut put = |this: &mut Self, chunk: Chunk| -> Result<bool, SnapshotError> {
            let key = chunk.key();
            let (hash, bytes) = chunk.encode()?;
            if this.chunks.get(&key).is_some_and(|(h, _)| *h == hash) {
                return Ok(false);
            }
            let bytes = Arc::new(bytes);
            new_chunks.push((hash.clone(), bytes.clone()));
            this.chunks.insert(key, (hash, bytes));
            Ok(true)
        };
        for ns in &namespaces {
            let objects = replica.namespace_objects(ns);
            let NamespaceBuild { config, endpoints } = mesh::build_namespace(ns, &objects);
            let empty = config.services.is_empty()
                && config.virtual_services.is_empty()
                && config.destination_rules.is_empty()
                && config.sidecars.is_empty()
                && config.gateways.is_empty();

            // Endpoints: upsert current services, drop those that left the namespace.
            let current: BTreeSet<ServiceKey> =
                endpoints.iter().map(|e| e.service.clone()).collect();
            for gone in self
                .endpoints_by_namespace
                .get(ns)
                .map(|prev| prev.difference(&current).cloned().collect::<Vec<_>>())
                .unwrap_or_default()
            {
                self.chunks.remove(&ChunkKey::Endpoints(gone.clone()));
                services_updated.insert(service_entry_key(&gone));
            }
            for eps in endpoints {
                let svc = eps.service.clone();
                if put(self, Chunk::Endpoints(eps))? {
                    // A DNS service's endpoints are inlined in its cluster (CDS), so
                    // they need a full push, not EDS.
                    full |= config
                        .services
                        .iter()
                        .any(|s| s.key() == svc && s.resolution != Resolution::ClientSideLb);
                    services_updated.insert(service_entry_key(&svc));
                }
            }
            if current.is_empty() {
                self.endpoints_by_namespace.remove(ns);
            } else {
                self.endpoints_by_namespace.insert(ns.clone(), current);
            }

            if empty {
                full |= self
                    .chunks
                    .remove(&ChunkKey::Namespace(ns.clone()))
                    .is_some();
                self.namespace_configs.remove(ns);
            } else {
                let previous_services = self.namespace_configs.get(ns).map(|c| c.services.clone());
                if previous_services.as_ref() != Some(&config.services) {
                    for s in previous_services.iter().flatten().chain(&config.services) {
                        services_updated.insert(service_entry_key(&s.key()));
                    }
                }
                if put(self, Chunk::Namespace(config.clone()))? {
                    full = true;
                }
                self.namespace_configs.insert(ns.clone(), config);
            }
        }
        if new_chunks.is_empty() && !full && services_updated.is_empty() {
            return Ok(None);
        }
        let warnings = if full {
            mesh::dangling_subsets(self.namespace_configs.values())
        } else {
            Vec::new()
        };
        let manifest = Manifest {
            version,
            built_unix_nanos: now_unix_nanos,
            chunks: self
                .chunks
                .iter()
                .map(|(key, (hash, _))| ChunkRef {
                    key: key.clone(),
                    hash: hash.clone(),
                })
                .collect(),
        };
        Ok(Some(Built {
            manifest,
            new_chunks,
            full,
            services_updated,
            namespaces_rebuilt: namespaces.len(),
            warnings,
        }))
    }
}

/// Istio names a service change `ServiceEntry <namespace>/<hostname>` in ConfigsUpdated.
pub fn service_entry_key(service: &ServiceKey) -> ConfigKey {
    ConfigKey::new(Kind::ServiceEntry, &service.namespace, &service.hostname)
}

#[cfg(test)]
mod tests;
