use super::cache::{CacheStats, TypeCache, TypeStats};
use super::clusters::{self, ClusterDefaults, EdsTarget};
use super::endpoints::locality::LocalityLb;
use super::endpoints::{self, AssignmentInput, EndpointFilter, ProxyView};
use super::listeners::{self, ListenerOptions};
use super::routes;
use super::util::resource;
use super::{XdsResource, types};
use crate::proxy::{InterceptionMode, Proxy};
use shoal_proto::model::{ServiceEndpoints, ServiceKey};
use shoal_proto::push_context::{NetworkGateways, PushContext, SidecarScope};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

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
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        GeneratorConfig {
            clusters: ClusterDefaults::default(),
            scope_cache_capacity: 1024,
            endpoint_cache_capacity: 65_536,
        }
    }
}

type Resources = Arc<Vec<Arc<XdsResource>>>;

/// A scope's encoded clusters and what EDS needs to answer for them.
#[derive(Clone)]
struct ClusterEntry {
    resources: Resources,
    eds: Arc<BTreeMap<String, EdsCluster>>,
    /// The endpoint chunks of DNS services, inlined into their clusters.
    dns: Arc<Vec<(ServiceKey, Option<Arc<ServiceEndpoints>>)>>,
}

/// One EDS cluster of a scope, with the keys its lookups use, made once per scope rather
/// than on every request.
struct EdsCluster {
    target: EdsTarget,
    /// The service whose endpoint chunk the assignment is built from.
    service: ServiceKey,
    /// The cluster's key in the endpoint cache.
    cache_key: EndpointKey,
}

/// (cluster name, namespace of the service it was built for), shared so that a lookup
/// does not allocate.
type EndpointKey = Arc<(String, String)>;

struct EndpointEntry {
    /// The chunk the assignment was built from (held, so its address is never reused).
    endpoints: Option<Arc<ServiceEndpoints>>,
    filter: EndpointFilter,
    locality_lb: LocalityLb,
    /// The network gateways it was built with (endpoints on other networks are theirs).
    gateways: Arc<NetworkGateways>,
    resource: Arc<XdsResource>,
}

fn same_gateways(a: &Arc<NetworkGateways>, b: &Arc<NetworkGateways>) -> bool {
    // An index rebuilt for another namespace's change holds equal gateways.
    Arc::ptr_eq(a, b) || a == b
}

/// (scope id, index generation): what a scope's content is a function of.
type ScopeKey = (String, u64);

fn scope_key(scope: &SidecarScope) -> ScopeKey {
    (scope.id.clone(), scope.generation)
}

fn same_chunk(a: Option<&Arc<ServiceEndpoints>>, b: Option<&Arc<ServiceEndpoints>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

fn mode_key(mode: InterceptionMode) -> u8 {
    match mode {
        InterceptionMode::Redirect => 0,
        InterceptionMode::Tproxy => 1,
        InterceptionMode::None => 2,
    }
}

/// Generates xDS resources, caching what is shared between proxies.
pub struct Generator {
    config: GeneratorConfig,
    /// Keyed by scope and whether the inbound passthrough cluster is included.
    clusters: TypeCache<(ScopeKey, bool), ClusterEntry>,
    /// Keyed by cluster name and the namespace of the service it was built for, and the
    /// proxy's network and (when the cluster balances by locality) locality.
    endpoints: TypeCache<(EndpointKey, ProxyView), Arc<EndpointEntry>>,
    /// Every assignment of a scope, sorted by name, keyed by scope, whether the inbound
    /// passthrough cluster is included (as the clusters are), and the endpoints they were
    /// built from, and the proxy's network and locality: what a proxy's EDS request is
    /// answered from, without a lookup per cluster.
    scope_endpoints: TypeCache<(ScopeKey, bool, u64, ProxyView), Resources>,
    /// Keyed by scope, interception mode, and the proxy's address when it is bound.
    listeners: TypeCache<(ScopeKey, u8, Option<String>), Resources>,
    /// Keyed by scope, and the proxy's labels when a VirtualService routes by them.
    routes: TypeCache<(ScopeKey, Option<BTreeMap<String, String>>), Resources>,
    /// Warnings already logged, so each is logged once.
    warned: Mutex<HashSet<String>>,
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
        Generator {
            clusters: TypeCache::new(config.scope_cache_capacity),
            endpoints: TypeCache::new(config.endpoint_cache_capacity),
            scope_endpoints: TypeCache::new(config.scope_cache_capacity),
            listeners: TypeCache::new(config.scope_cache_capacity),
            routes: TypeCache::new(config.scope_cache_capacity),
            warned: Mutex::new(HashSet::new()),
            config,
        }
    }

    /// Hits, misses and sizes of the caches, for metrics. EDS: a request answered from a
    /// scope's cached assignments counts as one hit; misses and entries count assignments.
    pub fn cache_stats(&self) -> CacheStats {
        let (scopes, assignments) = (self.scope_endpoints.stats(), self.endpoints.stats());
        CacheStats {
            clusters: self.clusters.stats(),
            endpoints: TypeStats {
                hits: scopes.hits + assignments.hits,
                ..assignments
            },
            listeners: self.listeners.stats(),
            routes: self.routes.stats(),
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
        let scope = push.sidecar_scope(&proxy.namespace, &proxy.labels);
        let all = match type_url {
            types::CLUSTER => self.clusters(&scope, push, proxy).resources,
            types::ENDPOINT => return Ok(self.endpoints(&scope, push, proxy, names)),
            types::LISTENER => self.listeners(&scope, proxy),
            types::ROUTE => self.routes(&scope, proxy),
            other => return Err(GenerateError::UnsupportedType(other.to_string())),
        };
        Ok(select(&all, names))
    }

    fn clusters(&self, scope: &SidecarScope, push: &PushContext, proxy: &Proxy) -> ClusterEntry {
        let inbound = proxy.interception != InterceptionMode::None;
        let fresh = |e: &ClusterEntry| {
            e.dns
                .iter()
                .all(|(key, chunk)| same_chunk(chunk.as_ref(), push.endpoints(key)))
        };
        self.clusters
            .get_or_build((scope_key(scope), inbound), fresh, || {
                let built = clusters::build(scope, push, &self.config.clusters, inbound);
                let dns = built
                    .dns_services
                    .iter()
                    .map(|k| (k.clone(), push.endpoints(k).cloned()))
                    .collect();
                ClusterEntry {
                    resources: Arc::new(
                        built
                            .clusters
                            .iter()
                            .map(|c| resource(c.name.clone(), c))
                            .collect(),
                    ),
                    eds: Arc::new(
                        built
                            .eds
                            .into_iter()
                            .map(|(name, target)| {
                                let cluster = EdsCluster {
                                    service: target.service.key(),
                                    cache_key: Arc::new((
                                        name.clone(),
                                        target.service.namespace.clone(),
                                    )),
                                    target,
                                };
                                (name, cluster)
                            })
                            .collect(),
                    ),
                    dns: Arc::new(dns),
                }
            })
    }

    fn endpoints(
        &self,
        scope: &SidecarScope,
        push: &PushContext,
        proxy: &Proxy,
        names: &[String],
    ) -> Vec<Arc<XdsResource>> {
        let inbound = proxy.interception != InterceptionMode::None;
        let view = ProxyView {
            network: proxy.network.clone(),
            locality: proxy.locality.clone(),
        };
        let key = (scope_key(scope), inbound, push.endpoints_id(), view);
        let all = self.scope_endpoints.get_or_build(
            key.clone(),
            |_| true,
            || {
                let eds = self.clusters(scope, push, proxy).eds;
                Arc::new(
                    eds.iter()
                        .map(|(name, cluster)| self.assignment(push, name, cluster, &key.3))
                        .collect(),
                )
            },
        );
        if names.is_empty() {
            return all.to_vec();
        }
        if !names.is_sorted() {
            return select(&all, names);
        }
        // Sorted names (as streams keep their subscriptions): a walk along the sorted
        // assignments, most often one step and one compare per name.
        let mut rest = &all[..];
        names
            .iter()
            .filter_map(|name| {
                let name = name.as_str();
                if rest.first().is_some_and(|r| r.name.as_str() < name) {
                    let next = &rest[1..];
                    rest = if next.first().is_none_or(|r| r.name.as_str() >= name) {
                        next
                    } else {
                        &next[next.partition_point(|r| r.name.as_str() < name)..]
                    };
                }
                rest.first().filter(|r| r.name == name).cloned()
            })
            .collect()
    }

    /// The assignment of one EDS cluster for proxies with `view`, shared by every scope
    /// that has the cluster until its service's endpoint chunk (or, for proxies on
    /// another network, a gateway) changes.
    fn assignment(
        &self,
        push: &PushContext,
        name: &str,
        cluster: &EdsCluster,
        view: &ProxyView,
    ) -> Arc<XdsResource> {
        let target = &cluster.target;
        let chunk = push.endpoints(&cluster.service);
        let gateways = &push.index().network_gateways;
        let fresh = |e: &Arc<EndpointEntry>| {
            same_chunk(e.endpoints.as_ref(), chunk)
                && e.filter == target.filter
                && e.locality_lb == target.locality_lb
                && same_gateways(&e.gateways, gateways)
        };
        let view = view.for_policy(&target.locality_lb);
        let key = (cluster.cache_key.clone(), view);
        let entry = self.endpoints.get_or_build(key.clone(), fresh, || {
            let input = AssignmentInput {
                filter: &target.filter,
                locality_lb: &target.locality_lb,
                view: &key.1,
                gateways,
            };
            Arc::new(EndpointEntry {
                endpoints: chunk.cloned(),
                filter: target.filter.clone(),
                locality_lb: target.locality_lb.clone(),
                gateways: gateways.clone(),
                resource: resource(
                    name,
                    &endpoints::load_assignment(name, chunk.map(|c| &**c), input),
                ),
            })
        });
        entry.resource.clone()
    }

    fn listeners(&self, scope: &SidecarScope, proxy: &Proxy) -> Resources {
        let bound_ip = (proxy.interception == InterceptionMode::None).then(|| proxy.ip.clone());
        let key = (scope_key(scope), mode_key(proxy.interception), bound_ip);
        self.listeners.get_or_build(
            key,
            |_| true,
            || {
                let opts = ListenerOptions {
                    mode: proxy.interception,
                    proxy_ip: &proxy.ip,
                };
                Arc::new(
                    listeners::build(scope, opts)
                        .iter()
                        .map(|l| resource(l.name.clone(), l))
                        .collect(),
                )
            },
        )
    }

    fn routes(&self, scope: &SidecarScope, proxy: &Proxy) -> Resources {
        let labels = routes::uses_source_labels(scope).then(|| proxy.labels.clone());
        self.routes.get_or_build(
            (scope_key(scope), labels),
            |_| true,
            || {
                let built = routes::build(scope, &proxy.labels);
                self.warn_once(&built.warnings);
                Arc::new(
                    built
                        .configs
                        .iter()
                        .map(|r| resource(r.name.clone(), r))
                        .collect(),
                )
            },
        )
    }

    fn warn_once(&self, warnings: &[String]) {
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded: forgetting old warnings only means logging them again.
        if warned.len() > 10_000 {
            warned.clear();
        }
        for w in warnings {
            if warned.insert(w.clone()) {
                tracing::warn!("{w}");
            }
        }
    }
}

/// `all` (sorted by name) when `names` is empty, else the named ones that exist, in the
/// order asked.
fn select(all: &[Arc<XdsResource>], names: &[String]) -> Vec<Arc<XdsResource>> {
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
#[cfg(test)]
mod tests;
