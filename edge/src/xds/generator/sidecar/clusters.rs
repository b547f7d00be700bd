//! CDS for sidecars: one encoded list per (scope, captured?), with what EDS needs to
//! answer for its clusters (current while the inlined DNS endpoints and the mTLS
//! destinations' identities are); and per (that list, inbound ports, proxy address where the
//! Sidecar's ingress needs it) the list with the proxy's inbound clusters merged in.
//! Inbound clusters are keyed by the workload's ports, not the proxy, so the pods of one
//! deployment share them.

use super::super::super::XdsResource;
use super::super::super::cache::{TypeCache, TypeStats};
use super::super::super::clusters::{self, ClusterOptions, EdsTarget};
use super::super::super::security::{self, outbound};
use super::super::super::util::resource;
use super::super::GeneratorConfig;
use super::super::table::{Request, ResourceGenerator, select};
use super::{Resources, ScopeKey, same_chunk, scope_key};
use crate::proxy::{InterceptionMode, Proxy};
use shoal_proto::model::{ServiceEndpoints, ServiceKey};
use shoal_proto::push_context::{InboundPort, PushContext, SidecarScope};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

/// A scope's encoded clusters and what EDS needs to answer for them.
#[derive(Clone)]
pub(super) struct ClusterEntry {
    pub resources: Resources,
    pub eds: Arc<BTreeMap<String, EdsCluster>>,
    /// The endpoint chunks of DNS services, inlined into their clusters.
    dns: Arc<Vec<(ServiceKey, Option<Arc<ServiceEndpoints>>)>>,
    /// The services whose mTLS verifies their workloads' identities.
    identities: Arc<Vec<IdentityWatch>>,
}

/// A service whose clusters name its workloads' SPIFFE IDs: they stay current while its
/// endpoints give the same IDs, which is checked once per new endpoint chunk (so an
/// endpoint that moves without a new service account costs no CDS rebuild).
struct IdentityWatch {
    service: ServiceKey,
    ids: Vec<String>,
    checked: Mutex<Option<Arc<ServiceEndpoints>>>,
}

impl IdentityWatch {
    fn current(&self, push: &PushContext) -> bool {
        let now = push.endpoints(&self.service);
        let mut checked = self.checked.lock().unwrap_or_else(PoisonError::into_inner);
        if same_chunk(checked.as_ref(), now) {
            return true;
        }
        let ids = outbound::spiffe_ids(
            push.index().mesh.trust_domain(),
            &self.service.namespace,
            now.iter()
                .flat_map(|e| e.endpoints.iter())
                .map(|e| e.service_account.as_str()),
        );
        if ids != self.ids {
            return false;
        }
        *checked = now.cloned();
        true
    }
}

/// One EDS cluster of a scope, with the keys its lookups use, made once per scope rather
/// than on every request.
pub(super) struct EdsCluster {
    pub target: EdsTarget,
    /// The service whose endpoint chunk the assignment is built from.
    pub service: ServiceKey,
    /// The cluster's key in the endpoint cache.
    pub cache_key: EndpointKey,
}

/// (cluster name, namespace of the service it was built for), shared so that a lookup
/// does not allocate.
pub(super) type EndpointKey = Arc<(String, String)>;

/// A scope's clusters with one proxy's inbound clusters merged in, sorted by name.
#[derive(Clone)]
struct WithInbound {
    /// The scope's clusters they were merged from (a rebuilt list makes this stale).
    outbound: Resources,
    all: Resources,
}

/// (scope, interception mode, inbound ports, the proxy's address when the Sidecar's
/// ingress sends to it).
type InboundKey = (ScopeKey, u8, Arc<[InboundPort]>, Option<String>);

pub(super) struct SidecarClusters {
    config: clusters::ClusterDefaults,
    /// Keyed by scope and what of the proxy the clusters depend on.
    cache: TypeCache<(ScopeKey, ClusterOptions), ClusterEntry>,
    with_inbound: TypeCache<InboundKey, WithInbound>,
}

impl SidecarClusters {
    pub fn new(config: &GeneratorConfig) -> Self {
        SidecarClusters {
            config: config.clusters.clone(),
            cache: TypeCache::new(config.scope_cache_capacity),
            with_inbound: TypeCache::new(config.scope_cache_capacity),
        }
    }

    /// The clusters of `scope` for proxies with `options`.
    pub fn entry(
        &self,
        scope: &SidecarScope,
        push: &PushContext,
        options: ClusterOptions,
    ) -> ClusterEntry {
        let fresh = |e: &ClusterEntry| {
            e.dns
                .iter()
                .all(|(key, chunk)| same_chunk(chunk.as_ref(), push.endpoints(key)))
                && e.identities.iter().all(|w| w.current(push))
        };
        self.cache
            .get_or_build((scope_key(scope), options), fresh, || {
                let built = clusters::build(scope, push, &self.config, options);
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
                    identities: Arc::new(
                        built
                            .identities
                            .into_iter()
                            .map(|(service, ids)| IdentityWatch {
                                checked: Mutex::new(push.endpoints(&service).cloned()),
                                service,
                                ids,
                            })
                            .collect(),
                    ),
                }
            })
    }
}

/// Whether the proxy's inbound traffic is captured (and so needs the inbound clusters).
pub(super) fn captured(mode: InterceptionMode) -> bool {
    mode != InterceptionMode::None
}

/// What of `proxy` its outbound clusters depend on.
pub(super) fn options(proxy: &Proxy) -> ClusterOptions {
    ClusterOptions {
        inbound_passthrough: captured(proxy.interception),
        mesh_identity: security::mesh_identity(proxy),
    }
}

impl ResourceGenerator for SidecarClusters {
    fn generate(&self, req: &Request<'_>, names: &[String]) -> Vec<Arc<XdsResource>> {
        let (proxy, scope) = (req.proxy, req.scope);
        let entry = self.entry(scope, req.push, options(proxy));
        // Ingress listeners replace the service targets: they alone shape the clusters.
        let ports = if scope.ingress.is_empty() && captured(proxy.interception) {
            req.push.service_instances().inbound_ports(&proxy.ip)
        } else {
            Arc::from([])
        };
        if ports.is_empty() && scope.ingress.is_empty() {
            return select(&entry.resources, names);
        }
        let ip = clusters::inbound::uses_proxy_ip(scope).then(|| proxy.ip.clone());
        let key = (
            scope_key(scope),
            super::listeners::mode_key(proxy.interception),
            ports.clone(),
            ip,
        );
        let fresh = |w: &WithInbound| Arc::ptr_eq(&w.outbound, &entry.resources);
        let merged = self.with_inbound.get_or_build(key, fresh, || {
            let inbound = clusters::inbound::build(
                scope,
                &ports,
                proxy.interception,
                &proxy.ip,
                &self.config,
            );
            let mut all: Vec<Arc<XdsResource>> = entry.resources.to_vec();
            all.extend(inbound.iter().map(|c| resource(c.name.clone(), c)));
            // Stable: an outbound cluster of the same name (there is none: the names'
            // directions differ) would stay first.
            all.sort_by(|a, b| a.name.cmp(&b.name));
            WithInbound {
                outbound: entry.resources.clone(),
                all: Arc::new(all),
            }
        });
        select(&merged.all, names)
    }

    /// Both caches' counters: a request of a proxy with inbound clusters looks up both.
    fn stats(&self) -> TypeStats {
        let (scopes, inbound) = (self.cache.stats(), self.with_inbound.stats());
        TypeStats {
            hits: scopes.hits + inbound.hits,
            misses: scopes.misses + inbound.misses,
            entries: scopes.entries + inbound.entries,
        }
    }
}
