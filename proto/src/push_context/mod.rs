//! The PushContext: an immutable, indexed view of one snapshot version that every push
//! reads, and the per-namespace [`SidecarScope`]s cut from it (Istio's `PushContext` and
//! `SidecarScope`).
//!
//! A PushContext is assembled from snapshot chunks. Namespace chunks feed the
//! [`ConfigIndex`] (services, VirtualServices, DestinationRules, Sidecars); endpoint chunks
//! are looked up per service. An endpoint-only update keeps the index (and every scope
//! computed from it) and swaps only the changed endpoint chunks; the service targets of
//! the addresses that changed endpoints or Services name are the only ones looked at
//! again. The security policies ([`security::SecurityPolicies`]) are indexed beside the
//! traffic config, in the [`ConfigIndex`].

mod aliases;
pub mod delegate;
pub mod gateway;
mod index;
mod instances;
pub mod policy;
mod scope;
pub mod security;
mod shards;

pub use index::{ConfigIndex, NetworkGateways};
pub use instances::{
    DISABLE_GATEWAY_PORT_TRANSLATION, GatewayPorts, InboundPort, ServiceInstances,
};
pub use scope::{SidecarScope, TrafficMode};

use crate::model::{NamespaceConfig, Service, ServiceEndpoints, ServiceKey};
use crate::snapshot::{Chunk, ChunkKey};
use shards::ShardedMap;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Source of [`PushContext::endpoints_id`]s: unique in the process.
static ENDPOINTS_IDS: AtomicU64 = AtomicU64::new(1);

#[derive(Clone, Default)]
pub struct PushContext {
    version: u64,
    namespaces: BTreeMap<String, Arc<NamespaceConfig>>,
    /// Sharded: a context derived for an endpoint change shares every shard but the
    /// changed services'.
    endpoints: ShardedMap<ServiceKey, Arc<ServiceEndpoints>>,
    /// See [`PushContext::endpoints_id`].
    endpoints_id: u64,
    index: Arc<ConfigIndex>,
    /// Service targets by workload address, built on first use (only sidecars and
    /// routers ask), or derived from the parent's where those were built.
    instances: OnceLock<Arc<ServiceInstances>>,
    /// The workload addresses whose service targets may differ from the parent context's
    /// (`with_changes`): those of the endpoints changed, and of the changed Services'
    /// endpoints. `None` for a context made from nothing.
    moved_addresses: Option<Arc<HashSet<String>>>,
}

impl std::fmt::Debug for PushContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushContext")
            .field("version", &self.version)
            .field("namespaces", &self.namespaces.len())
            .field("services_with_endpoints", &self.endpoints.len())
            .finish()
    }
}

impl PushContext {
    pub fn empty() -> Self {
        Self::default()
    }

    /// Assembles a PushContext from every chunk of a snapshot.
    pub fn from_chunks(version: u64, chunks: impl IntoIterator<Item = Chunk>) -> Self {
        Self::empty().with_changes(version, chunks, std::iter::empty())
    }

    /// The next version: `upserts` replace chunks with the same key, `removed` drop them.
    /// The config index is rebuilt only when a namespace chunk changed.
    pub fn with_changes(
        &self,
        version: u64,
        upserts: impl IntoIterator<Item = Chunk>,
        removed: impl IntoIterator<Item = ChunkKey>,
    ) -> Self {
        let mut next = self.clone();
        next.version = version;
        let mut namespaces_changed = false;
        let mut endpoints_changed = false;
        // The Services added, removed or changed. A workload's service targets (which
        // Services and ports its address serves) follow Services and endpoints only, so
        // a change of routing or policy alone moves no target.
        let mut services_changed: Vec<ServiceKey> = Vec::new();
        // The endpoint chunks replaced or removed and their replacements, then the
        // changed Services' chunks: their addresses are the moved ones.
        let mut touched: Vec<Arc<ServiceEndpoints>> = Vec::new();
        for key in removed {
            match key {
                ChunkKey::Namespace(ns) => {
                    if let Some(old) = next.namespaces.remove(&ns) {
                        namespaces_changed = true;
                        changed_services(&old.services, &[], &mut services_changed);
                    }
                }
                ChunkKey::Endpoints(svc) => {
                    if let Some(old) = next.endpoints.remove(&svc) {
                        endpoints_changed = true;
                        touched.push(old);
                    }
                }
            }
        }
        for chunk in upserts {
            match chunk {
                Chunk::Namespace(ns) => {
                    namespaces_changed = true;
                    let old = next.namespaces.get(&ns.namespace);
                    let old = old.map_or(&[][..], |o| o.services.as_slice());
                    changed_services(old, &ns.services, &mut services_changed);
                    next.namespaces.insert(ns.namespace.clone(), Arc::new(ns));
                }
                Chunk::Endpoints(eps) => {
                    endpoints_changed = true;
                    let eps = Arc::new(eps);
                    touched.push(eps.clone());
                    touched.extend(next.endpoints.insert(eps.service.clone(), eps));
                }
            }
        }
        for key in &services_changed {
            let (before, after) = (self.endpoints.get(key), next.endpoints.get(key));
            touched.extend(before.cloned());
            if !before.zip(after).is_some_and(|(b, a)| Arc::ptr_eq(b, a)) {
                touched.extend(after.cloned());
            }
        }
        if endpoints_changed {
            next.endpoints_id = ENDPOINTS_IDS.fetch_add(1, Ordering::Relaxed);
        }
        if namespaces_changed {
            next.index = Arc::new(ConfigIndex::build(version, &next.namespaces));
        }
        if endpoints_changed || !services_changed.is_empty() {
            next.instances = match self.instances.get() {
                Some(built) => OnceLock::from(Arc::new(built.with_services_changed(
                    &next.index,
                    &touched,
                    |key| next.endpoints.get(key),
                ))),
                None => OnceLock::new(),
            };
        }
        // Made from nothing, every address is new: none is listed.
        let from_scratch = self.namespaces.is_empty() && self.endpoints.len() == 0;
        next.moved_addresses = (!from_scratch).then(|| {
            let moved = touched.iter().flat_map(|eps| &eps.endpoints);
            Arc::new(moved.map(|ep| ep.address.clone()).collect())
        });
        next
    }

    /// The config revision this context reflects.
    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn index(&self) -> &Arc<ConfigIndex> {
        &self.index
    }

    pub fn namespaces(&self) -> &BTreeMap<String, Arc<NamespaceConfig>> {
        &self.namespaces
    }

    pub fn namespace(&self, ns: &str) -> Option<&Arc<NamespaceConfig>> {
        self.namespaces.get(ns)
    }

    pub fn endpoints(&self, service: &ServiceKey) -> Option<&Arc<ServiceEndpoints>> {
        self.endpoints.get(service)
    }

    pub fn all_endpoints(&self) -> impl Iterator<Item = &Arc<ServiceEndpoints>> {
        self.endpoints.values()
    }

    /// Identifies the endpoint chunks this context holds: contexts with equal ids hold
    /// the very same chunks (an id is drawn afresh, unique in the process, whenever a
    /// context is made with changed endpoints). Output derived from every endpoint can be
    /// cached under it and checked for freshness without looking at each chunk.
    pub fn endpoints_id(&self) -> u64 {
        self.endpoints_id
    }

    /// Service targets by workload address (Istio's proxy service targets), built on the
    /// first call for these endpoints and services.
    pub fn service_instances(&self) -> &Arc<ServiceInstances> {
        self.instances.get_or_init(|| {
            Arc::new(ServiceInstances::build(
                &self.index,
                self.endpoints.values(),
            ))
        })
    }

    /// Whether the service targets of the workload at `address` may differ from those of
    /// the context this one was derived from: a proxy judged against that one whose
    /// address did not move keeps its inbound ports.
    pub fn targets_may_have_moved(&self, address: &str) -> bool {
        self.moved_addresses
            .as_ref()
            .is_none_or(|moved| moved.contains(address))
    }

    /// The addresses [`PushContext::targets_may_have_moved`] answers for: `None` where
    /// every address may have moved. Lets a caller with many addresses to ask about go
    /// through these instead.
    pub fn moved_addresses(&self) -> Option<&HashSet<String>> {
        self.moved_addresses.as_deref()
    }

    /// The scope of a proxy in `namespace` with `labels` (cached per index generation).
    pub fn sidecar_scope(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Arc<SidecarScope> {
        self.index.sidecar_scope(namespace, labels)
    }
}

/// Adds to `out` the keys of the Services of `before` or `after` that are not in both
/// alike: added, removed or changed.
fn changed_services(before: &[Service], after: &[Service], out: &mut Vec<ServiceKey>) {
    if before == after {
        return;
    }
    let old: HashMap<ServiceKey, &Service> = before.iter().map(|s| (s.key(), s)).collect();
    let mut kept: HashSet<ServiceKey> = HashSet::with_capacity(after.len());
    for service in after {
        let key = service.key();
        if old.get(&key) != Some(&service) {
            out.push(key.clone());
        }
        kept.insert(key);
    }
    out.extend(old.into_keys().filter(|key| !kept.contains(key)));
}

#[cfg(test)]
mod mesh_config_tests;
#[cfg(test)]
mod tests;
