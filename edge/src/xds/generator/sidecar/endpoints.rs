//! EDS for sidecars: one assignment per (cluster, proxy view), shared by every scope that
//! has the cluster, and per scope the sorted list of them that a request is answered from.

use super::super::super::XdsResource;
use super::super::super::cache::{TypeCache, TypeStats};
use super::super::super::endpoints::locality::LocalityLb;
use super::super::super::endpoints::{self, AssignmentInput, EndpointFilter, ProxyView};
use super::super::super::util::resource;
use super::super::GeneratorConfig;
use super::super::table::{Request, ResourceGenerator, select};
use super::clusters::{EdsCluster, EndpointKey, SidecarClusters, captured, options};
use super::{Resources, ScopeKey, same_chunk, scope_key};
use shoal_proto::model::ServiceEndpoints;
use shoal_proto::push_context::{NetworkGateways, PushContext};
use std::sync::Arc;

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

pub(super) struct SidecarEndpoints {
    /// The clusters whose assignments are asked for.
    clusters: Arc<SidecarClusters>,
    /// Keyed by cluster name and the namespace of the service it was built for, and the
    /// proxy's network and (when the cluster balances by locality) locality.
    assignments: TypeCache<(EndpointKey, ProxyView), Arc<EndpointEntry>>,
    /// Every assignment of a scope, sorted by name, keyed by scope, whether the inbound
    /// passthrough cluster is included (as the clusters are), and the endpoints they were
    /// built from, and the proxy's network and locality: what a proxy's EDS request is
    /// answered from, without a lookup per cluster.
    scopes: TypeCache<(ScopeKey, bool, u64, ProxyView), Resources>,
}

impl SidecarEndpoints {
    pub fn new(config: &GeneratorConfig, clusters: Arc<SidecarClusters>) -> Self {
        SidecarEndpoints {
            clusters,
            assignments: TypeCache::new(config.endpoint_cache_capacity),
            scopes: TypeCache::new(config.scope_cache_capacity),
        }
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
        let entry = self.assignments.get_or_build(key.clone(), fresh, || {
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
}

impl ResourceGenerator for SidecarEndpoints {
    fn generate(&self, req: &Request<'_>, names: &[String]) -> Vec<Arc<XdsResource>> {
        let (proxy, push) = (req.proxy, req.push);
        let inbound = captured(proxy.interception);
        let view = ProxyView {
            network: proxy.network.clone(),
            locality: proxy.locality.clone(),
        };
        let key = (scope_key(req.scope), inbound, push.endpoints_id(), view);
        let all = self.scopes.get_or_build(
            key.clone(),
            |_| true,
            || {
                let eds = self.clusters.entry(req.scope, push, options(proxy)).eds;
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

    /// A request answered from a scope's cached assignments counts as one hit; misses
    /// and entries count assignments.
    fn stats(&self) -> TypeStats {
        let (scopes, assignments) = (self.scopes.stats(), self.assignments.stats());
        TypeStats {
            hits: scopes.hits + assignments.hits,
            ..assignments
        }
    }
}
