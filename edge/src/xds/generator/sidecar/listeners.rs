//! LDS for sidecars: per (scope, interception mode, the proxy's address when its
//! listeners bind or are named after it, its inbound ports, and the security policies
//! that apply to it). Keyed by those rather than the proxy, so that the pods of one
//! deployment share their listeners.

use super::super::super::XdsResource;
use super::super::super::cache::{TypeCache, TypeStats};
use super::super::super::listeners::{self, ListenerOptions};
use super::super::super::security::{InboundSecurity, PolicyKey, ProxyPolicies, mesh_identity};
use super::super::super::util::resource;
use super::super::GeneratorConfig;
use super::super::table::{Request, ResourceGenerator, select};
use super::{Resources, ScopeKey, scope_key};
use crate::proxy::InterceptionMode;
use shoal_proto::push_context::InboundPort;
use std::sync::Arc;

type ListenerKey = (ScopeKey, u8, Option<String>, Arc<[InboundPort]>, PolicyKey);

pub(super) struct SidecarListeners {
    cache: TypeCache<ListenerKey, Resources>,
}

pub(super) fn mode_key(mode: InterceptionMode) -> u8 {
    match mode {
        InterceptionMode::Redirect => 0,
        InterceptionMode::Tproxy => 1,
        InterceptionMode::None => 2,
    }
}

impl SidecarListeners {
    pub fn new(config: &GeneratorConfig) -> Self {
        SidecarListeners {
            cache: TypeCache::new(config.scope_cache_capacity),
        }
    }
}

impl ResourceGenerator for SidecarListeners {
    fn generate(&self, req: &Request<'_>, names: &[String]) -> Vec<Arc<XdsResource>> {
        let (proxy, scope) = (req.proxy, req.scope);
        // Sidecar ingress listeners without a bind are named after (and may bind) the
        // proxy's address.
        let uses_ip = proxy.interception == InterceptionMode::None
            || scope.ingress.iter().any(|i| i.bind.is_empty());
        let bound_ip = uses_ip.then(|| proxy.ip.clone());
        // Ingress listeners replace the service targets: they alone shape the inbound side.
        let inbound = if scope.ingress.is_empty() && proxy.interception != InterceptionMode::None {
            req.push.service_instances().inbound_ports(&proxy.ip)
        } else {
            Arc::from([])
        };
        let policies = ProxyPolicies::of(
            &req.push.index().security,
            &proxy.namespace,
            &proxy.labels,
            mesh_identity(proxy),
        );
        let key = (
            scope_key(scope),
            mode_key(proxy.interception),
            bound_ip,
            inbound.clone(),
            policies.key(req.jwks),
        );
        let all = self.cache.get_or_build(
            key,
            |_| true,
            || {
                let inbound_security = InboundSecurity::with_jwks(&policies, req.jwks);
                let opts = ListenerOptions {
                    mode: proxy.interception,
                    proxy_ip: &proxy.ip,
                    inbound: &inbound,
                    inbound_security: &inbound_security,
                };
                Arc::new(
                    listeners::build(req.scope, opts)
                        .iter()
                        .map(|l| resource(l.name.clone(), l))
                        .collect(),
                )
            },
        );
        select(&all, names)
    }

    fn stats(&self) -> TypeStats {
        self.cache.stats()
    }
}
