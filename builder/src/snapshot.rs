//! Incremental snapshot construction (I/O-free): rebuild the dirty namespaces' chunks,
//! keep every other chunk, re-encode only the leaf pages whose refs changed and the
//! index pages above them, and say what changed.

use crate::mesh::{self, Feeds, NamespaceBuild};
use crate::replica::{Dirty, Replica};
use shoal_proto::change::{self, ChangeKey};
use shoal_proto::model::{NamespaceConfig, Resolution, ServiceKey};
use shoal_proto::snapshot::{
    Chunk, ChunkHash, ChunkKey, ChunkRef, Encoded, Manifest, Pages, SnapshotError,
};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

/// A snapshot ready to write.
#[derive(Debug)]
pub struct Built {
    /// The root: the top of the snapshot's page tree.
    pub manifest: Manifest,
    /// Chunks this build produced that the previous snapshot did not have.
    pub new_chunks: Vec<Encoded>,
    /// Pages this build produced that the previous snapshot did not have: each leaf page
    /// whose refs changed and the index page above it at each level (every page when
    /// the page count changed).
    pub new_pages: Vec<Encoded>,
    /// Namespace chunks changed or removed, or a DNS service's endpoints (inlined in its
    /// cluster): proxies need a full push.
    pub full: bool,
    /// What changed for proxies: services by key, routing by hostname, Sidecars and
    /// Gateways by key. Empty means everything (a first build, or a change a wildcard
    /// host keeps from being narrowed).
    pub changed: BTreeSet<ChangeKey>,
    pub namespaces_rebuilt: usize,
    pub warnings: Vec<String>,
}

/// The previous snapshot's chunks and pages, from which the next is built.
#[derive(Default)]
pub struct SnapshotBuilder {
    chunks: BTreeMap<ChunkKey, (ChunkHash, Arc<Vec<u8>>)>,
    /// The refs of `chunks`, paged.
    pages: Pages,
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

    /// The page tree of the current snapshot.
    pub fn pages(&self) -> &Pages {
        &self.pages
    }

    /// Every chunk and page of the current snapshot, encoded (what restoring it writes).
    pub fn encoded(&self) -> Vec<(ChunkHash, Arc<Vec<u8>>)> {
        self.chunks
            .values()
            .chain(self.pages.encoded())
            .cloned()
            .collect()
    }

    /// Every chunk and page hash of the current snapshot (what keeping it alive refreshes).
    pub fn hashes(&self) -> Vec<ChunkHash> {
        self.chunks
            .values()
            .chain(self.pages.encoded())
            .map(|(h, _)| *h)
            .collect()
    }

    /// Every chunk of the current snapshot, by key: what its pages list.
    pub fn chunk_refs(&self) -> Vec<ChunkRef> {
        self.chunks
            .iter()
            .map(|(key, (hash, _))| ChunkRef {
                key: key.clone(),
                hash: *hash,
            })
            .collect()
    }

    /// Drops a chunk (and its ref); whether it was held.
    fn remove(&mut self, key: &ChunkKey) -> bool {
        self.pages.remove(key);
        self.chunks.remove(key).is_some()
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
        // A first build always yields a snapshot, even of an empty mesh, so edges can
        // tell "nothing configured" from "not built yet".
        let everything = dirty.all;
        let (namespaces, kinds): (BTreeSet<String>, _) = if dirty.all {
            let namespaces = replica
                .namespaces()
                .cloned()
                .chain(self.namespace_configs.keys().cloned())
                .collect();
            (namespaces, BTreeMap::new())
        } else {
            (dirty.namespaces, dirty.kinds)
        };
        let mut new_chunks = Vec::new();
        let mut full = false;
        let mut changed = BTreeSet::new();
        // False once a change cannot be narrowed to hostnames.
        let mut narrowed = !everything;
        let mut put = |this: &mut Self, chunk: &Chunk| -> Result<bool, SnapshotError> {
            let key = chunk.key();
            let (hash, bytes) = chunk.encode()?;
            if this.chunks.get(&key).is_some_and(|(h, _)| *h == hash) {
                return Ok(false);
            }
            let bytes = Arc::new(bytes);
            new_chunks.push((hash, bytes.clone()));
            this.pages.insert(key.clone(), hash);
            this.chunks.insert(key, (hash, bytes));
            Ok(true)
        };
        for ns in &namespaces {
            let objects = replica.namespace_objects(ns);
            let previous = self.namespace_configs.remove(ns);
            // Only the kinds that changed decide what is rebuilt (see `Feeds`); a
            // namespace this builder holds no config for is rebuilt entirely.
            let feeds = kinds.get(ns).and_then(|kinds| {
                let mut feeds = kinds.iter().map(|k| Feeds::of(*k));
                let first = feeds.next()?;
                feeds.all(|f| f == first).then_some(first)
            });
            // (config, endpoints when rebuilt, whether the namespace chunk may have changed)
            let (config, endpoints, config_rebuilt) = match (feeds, previous) {
                // Routing objects only: services and endpoints are as they were.
                (Some(Feeds::Routing), Some(previous)) => {
                    let mut config = mesh::build_routing(ns, &objects);
                    match change::routing_changes(&previous, &config) {
                        Some(keys) => changed.extend(keys),
                        None => narrowed = false,
                    }
                    config.services = previous.services;
                    config.network_gateways = previous.network_gateways;
                    (config, None, true)
                }
                // Endpoint sources only: the namespace chunk is as it was.
                (Some(Feeds::Endpoints), Some(previous)) => {
                    let endpoints = mesh::build_endpoints(ns, &objects);
                    (previous, Some(endpoints), false)
                }
                (_, previous) => {
                    let NamespaceBuild { config, endpoints } = mesh::build_namespace(ns, &objects);
                    match change::namespace_changes(previous.as_ref(), Some(&config)) {
                        Some(keys) => changed.extend(keys),
                        None => narrowed = false,
                    }
                    (config, Some(endpoints), true)
                }
            };
            let empty = config_is_empty(&config);

            // Endpoints: upsert current services, drop those that left the namespace.
            if let Some(endpoints) = endpoints {
                let current: BTreeSet<ServiceKey> =
                    endpoints.iter().map(|e| e.service.clone()).collect();
                for gone in self
                    .endpoints_by_namespace
                    .get(ns)
                    .map(|prev| prev.difference(&current).cloned().collect::<Vec<_>>())
                    .unwrap_or_default()
                {
                    self.remove(&ChunkKey::Endpoints(gone.clone()));
                    changed.insert(ChangeKey::Service(gone));
                }
                // A DNS service's endpoints are inlined in its cluster (CDS), so they
                // need a full push, not EDS. (A set, not a scan of the services per chunk.)
                let inlined: HashSet<ServiceKey> = config
                    .services
                    .iter()
                    .filter(|s| s.resolution != Resolution::ClientSideLb)
                    .map(|s| s.key())
                    .collect();
                for eps in endpoints {
                    let svc = eps.service.clone();
                    if put(self, &Chunk::Endpoints(eps))? {
                        full |= inlined.contains(&svc);
                        changed.insert(ChangeKey::Service(svc));
                    }
                }
                if current.is_empty() {
                    self.endpoints_by_namespace.remove(ns);
                } else {
                    self.endpoints_by_namespace.insert(ns.clone(), current);
                }
            }

            if empty {
                full |= self.remove(&ChunkKey::Namespace(ns.clone()));
            } else {
                let config = if !config_rebuilt {
                    config
                } else {
                    // Encoded in place: a namespace's config is not cloned to be hashed.
                    let chunk = Chunk::Namespace(config);
                    full |= put(self, &chunk)?;
                    let Chunk::Namespace(config) = chunk else {
                        unreachable!("built as a namespace chunk")
                    };
                    config
                };
                self.namespace_configs.insert(ns.clone(), config);
            }
        }
        if new_chunks.is_empty() && !full && changed.is_empty() && !everything {
            return Ok(None);
        }
        if !narrowed {
            full = true;
            changed.clear();
        }
        let warnings = if full {
            mesh::dangling_subsets(self.namespace_configs.values())
        } else {
            Vec::new()
        };
        let new_pages = self.pages.seal()?;
        Ok(Some(Built {
            manifest: self.pages.manifest(version, now_unix_nanos),
            new_chunks,
            new_pages,
            full,
            changed,
            namespaces_rebuilt: namespaces.len(),
            warnings,
        }))
    }
}

fn config_is_empty(config: &NamespaceConfig) -> bool {
    config.services.is_empty()
        && config.virtual_services.is_empty()
        && config.destination_rules.is_empty()
        && config.sidecars.is_empty()
        && config.gateways.is_empty()
        && config.credentials.is_empty()
        && config.network_gateways.is_empty()
        && config.mesh_configs.is_empty()
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod emptiness {
    use super::*;
    use shoal_proto::config::k8s::SecretSpec;
    use shoal_proto::model::NamedConfig;

    #[test]
    fn a_namespace_holding_only_credentials_keeps_its_chunk() {
        let mut config = NamespaceConfig {
            namespace: "istio-system".into(),
            ..Default::default()
        };
        assert!(config_is_empty(&config));
        config.credentials.push(NamedConfig {
            name: "ingress-cert".into(),
            namespace: "istio-system".into(),
            created: 0,
            spec: SecretSpec::default(),
        });
        assert!(!config_is_empty(&config));
    }
}
