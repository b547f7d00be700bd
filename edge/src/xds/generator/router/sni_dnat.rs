//! CDS and EDS for routers: the sidecar rows' answers with the SNI-DNAT clusters of the
//! router's `AUTO_PASSTHROUGH` servers ([`gateway::auto_passthrough`]) merged in. A
//! router without such a server gets the sidecar's answers unchanged.

use super::super::super::XdsResource;
use super::super::super::cache::{TypeCache, TypeStats};
use super::super::super::clusters::{ClusterDefaults, EdsTarget};
use super::super::super::endpoints::{self, AssignmentInput, ProxyView};
use super::super::super::gateway::auto_passthrough;
use super::super::super::util::resource;
use super::super::GeneratorConfig;
use super::super::table::{Request, ResourceGenerator, select};
use super::{RouterKey, router_key};
use shoal_proto::model::ServiceEndpoints;

/// SNI-DNAT clusters and their endpoints do not depend on the fetched JWKS.
const NO_JWKS: u64 = 0;
use shoal_proto::push_context::NetworkGateways;
use shoal_proto::push_context::gateway::MergedGateway;
use std::collections::BTreeMap;
use std::sync::Arc;

type Resources = Arc<Vec<Arc<XdsResource>>>;

/// A router's SNI-DNAT clusters, encoded, and their endpoints' targets.
struct SniDnatEntry {
    /// Sorted by name.
    clusters: Resources,
    eds: BTreeMap<String, EdsTarget>,
}

/// The SNI-DNAT clusters of each router, shared by its CDS and EDS rows.
pub(super) struct SniDnatClusters {
    defaults: ClusterDefaults,
    cache: TypeCache<RouterKey, Arc<SniDnatEntry>>,
}

impl SniDnatClusters {
    pub fn new(config: &GeneratorConfig) -> Self {
        SniDnatClusters {
            defaults: config.clusters.clone(),
            cache: TypeCache::new(config.scope_cache_capacity),
        }
    }

    fn entry(&self, req: &Request<'_>) -> Arc<SniDnatEntry> {
        let ports = req.push.service_instances().gateway_ports(&req.proxy.ip);
        self.cache.get_or_build(
            router_key(req.scope, &req.proxy.labels, ports.clone(), NO_JWKS),
            |_| true,
            || {
                let merged = MergedGateway::for_router(req.push.index(), &req.proxy.labels, &ports);
                let hosts = auto_passthrough::server_hosts(&merged);
                let targets = auto_passthrough::targets(req.scope, &hosts);
                let built = auto_passthrough::clusters(&targets, &self.defaults);
                Arc::new(SniDnatEntry {
                    clusters: Arc::new(
                        built
                            .clusters
                            .iter()
                            .map(|c| resource(c.name.clone(), c))
                            .collect(),
                    ),
                    eds: built.eds,
                })
            },
        )
    }
}

/// `base` (the sidecar row's answer to the same `names`) with `extra` merged in: sorted
/// by name for a wildcard request, else in the order asked.
fn merge(
    base: Vec<Arc<XdsResource>>,
    extra: &[Arc<XdsResource>],
    names: &[String],
) -> Vec<Arc<XdsResource>> {
    if extra.is_empty() {
        return base;
    }
    let mut all = base;
    if names.is_empty() {
        all.extend(extra.iter().cloned());
        all.sort_by(|a, b| a.name.cmp(&b.name));
        return all;
    }
    let wanted = select(extra, names);
    if wanted.is_empty() {
        return all;
    }
    let mut by_name: BTreeMap<&str, Arc<XdsResource>> = BTreeMap::new();
    for r in all.iter().chain(wanted.iter()) {
        by_name.insert(r.name.as_str(), r.clone());
    }
    names
        .iter()
        .filter_map(|n| by_name.get(n.as_str()).cloned())
        .collect()
}

/// CDS for routers.
pub(super) struct RouterClusters {
    sidecar: Arc<dyn ResourceGenerator>,
    sni_dnat: Arc<SniDnatClusters>,
}

impl RouterClusters {
    pub fn new(sidecar: Arc<dyn ResourceGenerator>, sni_dnat: Arc<SniDnatClusters>) -> Self {
        RouterClusters { sidecar, sni_dnat }
    }
}

impl ResourceGenerator for RouterClusters {
    fn generate(&self, req: &Request<'_>, names: &[String]) -> Vec<Arc<XdsResource>> {
        let entry = self.sni_dnat.entry(req);
        merge(self.sidecar.generate(req, names), &entry.clusters, names)
    }

    /// Its own cache's counters (the sidecar row counts its own).
    fn stats(&self) -> TypeStats {
        self.sni_dnat.cache.stats()
    }
}

/// One SNI-DNAT assignment and what it was built from.
struct Assignment {
    /// The endpoint chunk (held, so its address is never reused).
    endpoints: Option<Arc<ServiceEndpoints>>,
    filter: endpoints::EndpointFilter,
    resource: Arc<XdsResource>,
}

/// EDS for routers.
pub(super) struct RouterEndpoints {
    sidecar: Arc<dyn ResourceGenerator>,
    sni_dnat: Arc<SniDnatClusters>,
    /// Per (cluster, router network): rebuilt only when its service's chunk changes.
    assignments: TypeCache<(String, String), Arc<Assignment>>,
    /// A router's assignments, sorted, per its key, the endpoints and its network.
    routers: TypeCache<(RouterKey, u64, String), Resources>,
}

impl RouterEndpoints {
    pub fn new(
        config: &GeneratorConfig,
        sidecar: Arc<dyn ResourceGenerator>,
        sni_dnat: Arc<SniDnatClusters>,
    ) -> Self {
        RouterEndpoints {
            sidecar,
            sni_dnat,
            assignments: TypeCache::new(config.endpoint_cache_capacity),
            routers: TypeCache::new(config.scope_cache_capacity),
        }
    }

    fn assignment(&self, req: &Request<'_>, name: &str, target: &EdsTarget) -> Arc<XdsResource> {
        let chunk = req.push.endpoints(&target.service.key());
        let fresh = |a: &Arc<Assignment>| {
            a.filter == target.filter
                && match (&a.endpoints, chunk) {
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                    (None, None) => true,
                    _ => false,
                }
        };
        let key = (name.to_string(), req.proxy.network.clone());
        let built = self.assignments.get_or_build(key, fresh, || {
            // No gateways: the endpoints on other networks are left out, never sent
            // through another gateway.
            let input = AssignmentInput {
                filter: &target.filter,
                locality_lb: &target.locality_lb,
                view: &ProxyView {
                    network: req.proxy.network.clone(),
                    locality: String::new(),
                },
                gateways: &NetworkGateways::new(),
            };
            Arc::new(Assignment {
                endpoints: chunk.cloned(),
                filter: target.filter.clone(),
                resource: resource(
                    name,
                    &endpoints::load_assignment(name, chunk.map(|c| &**c), input),
                ),
            })
        });
        built.resource.clone()
    }
}

impl ResourceGenerator for RouterEndpoints {
    fn generate(&self, req: &Request<'_>, names: &[String]) -> Vec<Arc<XdsResource>> {
        let base = self.sidecar.generate(req, names);
        let entry = self.sni_dnat.entry(req);
        if entry.eds.is_empty() {
            return base;
        }
        let ports = req.push.service_instances().gateway_ports(&req.proxy.ip);
        let key = (
            router_key(req.scope, &req.proxy.labels, ports, NO_JWKS),
            req.push.endpoints_id(),
            req.proxy.network.clone(),
        );
        let all = self.routers.get_or_build(
            key,
            |_| true,
            || {
                Arc::new(
                    entry
                        .eds
                        .iter()
                        .map(|(name, target)| self.assignment(req, name, target))
                        .collect(),
                )
            },
        );
        merge(base, &all, names)
    }

    fn stats(&self) -> TypeStats {
        let (routers, assignments) = (self.routers.stats(), self.assignments.stats());
        TypeStats {
            hits: routers.hits + assignments.hits,
            ..assignments
        }
    }
}
