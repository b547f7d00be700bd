use super::SidecarScope;
use crate::config::mesh::{MESH_CONFIGMAP, MeshConfig};
use crate::config::{istio, k8s};
use crate::model::{NamedConfig, NamespaceConfig, NetworkGateway, Service};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// (address of the selected Sidecar in this index or 0, positions of the selector
/// DestinationRules that select the proxy): with the proxies' namespace, what a scope is
/// a function of. The last is empty in namespaces without selector rules, so their
/// proxies share scopes whatever their labels.
type ScopeSelection = (usize, Vec<usize>);

/// Indexes over every namespace's config: what Istio's `serviceIndex`,
/// `virtualServiceIndex`, `destinationRuleIndex` and `sidecarsByNamespace` hold.
/// Rebuilt only when a namespace chunk changes; scopes are cached per index.
#[derive(Default)]
pub struct ConfigIndex {
    /// The snapshot version this index was built at; caches keyed on scope content use it.
    pub generation: u64,
    /// Unique to this index in the process (0: an empty default one): a scope whose
    /// `index_id` is this one was cut from it.
    pub id: u64,
    /// The mesh config in force (Istio's defaults without one). Its `exportTo` defaults
    /// are already filled into the indexed objects that set none.
    pub mesh: Arc<MeshConfig>,
    /// The namespace whose Sidecar and DestinationRules apply mesh-wide.
    pub root_namespace: String,
    /// Every service, sorted by (hostname, namespace).
    pub services: Vec<Arc<Service>>,
    pub services_by_host: HashMap<String, Vec<Arc<Service>>>,
    /// VirtualServices bound to sidecars (`gateways` empty or containing `mesh`), sorted
    /// by (namespace, name).
    pub virtual_services: Vec<Arc<NamedConfig<istio::VirtualService>>>,
    /// VirtualServices without hosts, which only `delegate` routes use, by (namespace,
    /// name).
    pub delegates: HashMap<(String, String), Arc<NamedConfig<istio::VirtualService>>>,
    pub destination_rules: Vec<Arc<NamedConfig<istio::DestinationRule>>>,
    /// Positions in `destination_rules` of the rules for each exact host, ascending.
    destination_rules_by_host: HashMap<String, Vec<usize>>,
    /// Positions in `destination_rules` of the rules whose host is a wildcard, ascending.
    wildcard_destination_rules: Vec<usize>,
    /// Positions in `destination_rules` of the rules with a `workloadSelector`, by their
    /// namespace (the only one where they apply), ascending.
    selector_destination_rules: HashMap<String, Vec<usize>>,
    pub sidecars_by_namespace: HashMap<String, Vec<Arc<NamedConfig<istio::Sidecar>>>>,
    /// Every Gateway, sorted by (namespace, name).
    pub gateways: Vec<Arc<NamedConfig<istio::Gateway>>>,
    /// VirtualServices bound to at least one Gateway (not only `mesh`), sorted by
    /// (namespace, name).
    pub gateway_virtual_services: Vec<Arc<NamedConfig<istio::VirtualService>>>,
    /// TLS credentials by (namespace, Secret name).
    pub credentials: HashMap<(String, String), Arc<k8s::SecretSpec>>,
    /// Every network's gateways, sorted.
    pub network_gateways: Arc<NetworkGateways>,
    /// PeerAuthentications, AuthorizationPolicies and RequestAuthentications.
    pub security: Arc<super::security::SecurityPolicies>,
    /// Scopes cut from this index, by the proxies' namespace first: a lookup by `&str`
    /// allocates no key.
    scopes: Mutex<HashMap<String, HashMap<ScopeSelection, Arc<SidecarScope>>>>,
}

/// Source of [`ConfigIndex::id`]s.
static INDEX_IDS: AtomicU64 = AtomicU64::new(1);

/// Gateways by the network they lead into.
pub type NetworkGateways = BTreeMap<String, Vec<NetworkGateway>>;

impl ConfigIndex {
    pub fn build(generation: u64, namespaces: &BTreeMap<String, Arc<NamespaceConfig>>) -> Self {
        let mesh = mesh_config(namespaces);
        let mut index = ConfigIndex {
            generation,
            id: INDEX_IDS.fetch_add(1, Ordering::Relaxed),
            root_namespace: mesh.root_namespace().to_string(),
            mesh: Arc::new(mesh),
            ..Default::default()
        };
        // Istio's `exportToDefaults`: an object that sets no `exportTo` gets the mesh's.
        let mesh = index.mesh.clone();
        let service_export = &mesh.default_service_export_to;
        let vs_export = &mesh.default_virtual_service_export_to;
        let dr_export = &mesh.default_destination_rule_export_to;
        let mut network_gateways = NetworkGateways::new();
        for ns in namespaces.values() {
            for gw in &ns.network_gateways {
                network_gateways
                    .entry(gw.network.clone())
                    .or_default()
                    .push(gw.clone());
            }
            for svc in &ns.services {
                let mut svc = svc.clone();
                if svc.export_to.0.is_empty() {
                    svc.export_to.0.clone_from(service_export);
                }
                let svc = Arc::new(svc);
                index
                    .services_by_host
                    .entry(svc.hostname.clone())
                    .or_default()
                    .push(svc.clone());
                index.services.push(svc);
            }
            for vs in &ns.virtual_services {
                let mut vs = vs.clone();
                if vs.spec.export_to.is_empty() {
                    vs.spec.export_to.clone_from(vs_export);
                }
                if vs.spec.hosts.is_empty() {
                    index
                        .delegates
                        .insert((vs.namespace.clone(), vs.name.clone()), Arc::new(vs));
                } else {
                    let vs = Arc::new(vs);
                    if vs.spec.gateways.is_empty() || vs.spec.gateways.iter().any(|g| g == "mesh") {
                        index.virtual_services.push(vs.clone());
                    }
                    if vs.spec.gateways.iter().any(|g| g != "mesh") {
                        index.gateway_virtual_services.push(vs);
                    }
                }
            }
            index
                .gateways
                .extend(ns.gateways.iter().cloned().map(Arc::new));
            for c in &ns.credentials {
                index.credentials.insert(
                    (c.namespace.clone(), c.name.clone()),
                    Arc::new(c.spec.clone()),
                );
            }
            index
                .destination_rules
                .extend(ns.destination_rules.iter().map(|dr| {
                    let mut dr = dr.clone();
                    if dr.spec.export_to.is_empty() {
                        dr.spec.export_to.clone_from(dr_export);
                    }
                    Arc::new(dr)
                }));
            if !ns.sidecars.is_empty() {
                index.sidecars_by_namespace.insert(
                    ns.namespace.clone(),
                    ns.sidecars.iter().cloned().map(Arc::new).collect(),
                );
            }
        }
        for gateways in network_gateways.values_mut() {
            gateways.sort();
            gateways.dedup();
        }
        index.network_gateways = Arc::new(network_gateways);
        index
            .services
            .sort_by(|a, b| (&a.hostname, &a.namespace).cmp(&(&b.hostname, &b.namespace)));
        for (i, dr) in index.destination_rules.iter().enumerate() {
            if dr.spec.workload_selector.is_some() {
                index
                    .selector_destination_rules
                    .entry(dr.namespace.clone())
                    .or_default()
                    .push(i);
            }
            if dr.spec.host.starts_with('*') {
                index.wildcard_destination_rules.push(i);
            } else {
                index
                    .destination_rules_by_host
                    .entry(dr.spec.host.clone())
                    .or_default()
                    .push(i);
            }
        }
        // Providers name services: resolved once the registry is indexed.
        let providers = super::security::ext_authz::resolve(&index.mesh, &index);
        index.security = Arc::new(
            super::security::SecurityPolicies::build(index.mesh.root_namespace(), namespaces)
                .with_ext_authz(providers),
        );
        index
    }

    /// The DestinationRules whose host can match `hostname` (those for exactly it, and
    /// every wildcard one), in `destination_rules` order: what a scope picks a service's
    /// rule from, without going through every rule of the mesh for each service.
    pub fn destination_rule_candidates<'a>(
        &'a self,
        hostname: &str,
    ) -> impl Iterator<Item = &'a Arc<NamedConfig<istio::DestinationRule>>> + 'a {
        let exact = self
            .destination_rules_by_host
            .get(hostname)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let (mut exact, mut wild) = (
            exact.iter().copied().peekable(),
            self.wildcard_destination_rules.iter().copied().peekable(),
        );
        std::iter::from_fn(move || match (exact.peek(), wild.peek()) {
            (Some(e), Some(w)) if w < e => wild.next(),
            (Some(_), _) => exact.next(),
            (None, _) => wild.next(),
        })
        .map(|i| &self.destination_rules[i])
    }

    /// The Sidecar that applies to a workload, as Istio chooses it: one in its namespace
    /// whose selector matches its labels, else its namespace's selector-less one, else the
    /// root namespace's selector-less one.
    pub fn sidecar_for(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Option<&Arc<NamedConfig<istio::Sidecar>>> {
        let selects = |sc: &NamedConfig<istio::Sidecar>| match &sc.spec.workload_selector {
            Some(sel) if !sel.labels.is_empty() => {
                sel.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            }
            _ => false,
        };
        let no_selector = |sc: &&Arc<NamedConfig<istio::Sidecar>>| {
            sc.spec
                .workload_selector
                .as_ref()
                .is_none_or(|s| s.labels.is_empty())
        };
        let local = self.sidecars_by_namespace.get(namespace);
        if let Some(found) = local.and_then(|v| v.iter().find(|sc| selects(sc))) {
            return Some(found);
        }
        if let Some(found) = local.and_then(|v| v.iter().find(no_selector)) {
            return Some(found);
        }
        self.sidecars_by_namespace
            .get(&self.root_namespace)
            .and_then(|v| v.iter().find(no_selector))
    }

    /// The DestinationRules of `namespace` whose `workloadSelector` selects a workload
    /// with `labels` (a selector without labels selects every workload), as positions in
    /// `destination_rules`.
    fn selector_rules_for(&self, namespace: &str, labels: &BTreeMap<String, String>) -> Vec<usize> {
        let Some(positions) = self.selector_destination_rules.get(namespace) else {
            return Vec::new();
        };
        positions
            .iter()
            .copied()
            .filter(|i| {
                self.destination_rules[*i]
                    .spec
                    .workload_selector
                    .as_ref()
                    .is_some_and(|sel| sel.labels.iter().all(|(k, v)| labels.get(k) == Some(v)))
            })
            .collect()
    }

    /// Whether a Sidecar or a DestinationRule of `namespace` selects workloads by label:
    /// where none does, every proxy of the namespace has the same scope, whatever its
    /// labels (a selector without labels counts as selecting: it names rules by position).
    pub fn selects_by_labels(&self, namespace: &str) -> bool {
        let selecting_sidecar = |sc: &Arc<NamedConfig<istio::Sidecar>>| {
            sc.spec
                .workload_selector
                .as_ref()
                .is_some_and(|s| !s.labels.is_empty())
        };
        self.selector_destination_rules.contains_key(namespace)
            || self
                .sidecars_by_namespace
                .get(namespace)
                .is_some_and(|v| v.iter().any(selecting_sidecar))
    }

    pub fn sidecar_scope(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Arc<SidecarScope> {
        let sidecar = self.sidecar_for(namespace, labels);
        // The index holds its Sidecars as long as it holds the cache: an address names one.
        let selection = (
            sidecar.map_or(0, |s| Arc::as_ptr(s) as usize),
            self.selector_rules_for(namespace, labels),
        );
        let mut scopes = self.scopes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(scope) = scopes.get(namespace).and_then(|by| by.get(&selection)) {
            return scope.clone();
        }
        let selected: Vec<_> = (selection.1.iter())
            .map(|i| &self.destination_rules[*i])
            .collect();
        let scope = Arc::new(SidecarScope::new(
            self,
            namespace,
            sidecar.map(|s| &**s),
            &selected,
        ));
        scopes
            .entry(namespace.to_string())
            .or_default()
            .insert(selection, scope.clone());
        scope
    }
}

/// The mesh config in force: the one named `istio` (Shoal serves the default revision),
/// else the first `istio-<revision>` by name (a mesh installed by revision only), else
/// Istio's defaults. Only the system namespace's ConfigMaps are ingested.
impl super::security::ext_authz::ServiceLookup for ConfigIndex {
    fn namespaces_of(&self, hostname: &str) -> Vec<String> {
        let mut out: Vec<String> = (self.services_by_host.get(hostname).into_iter().flatten())
            .map(|s| s.namespace.clone())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

fn mesh_config(namespaces: &BTreeMap<String, Arc<NamespaceConfig>>) -> MeshConfig {
    let mut configs: Vec<&NamedConfig<MeshConfig>> = namespaces
        .values()
        .flat_map(|ns| &ns.mesh_configs)
        .collect();
    configs.sort_by_key(|c| (c.name != MESH_CONFIGMAP, &c.name, &c.namespace));
    configs.first().map(|c| c.spec.clone()).unwrap_or_default()
}

#[cfg(test)]
mod tests;
