//! LDS for sidecars: per (scope, interception mode, and the proxy's address when its
//! listeners bind it).

use super::super::super::XdsResource;
use super::super::super::cache::{TypeCache, TypeStats};
use super::super::super::listeners::{self, ListenerOptions};
use super::super::super::util::resource;
use super::super::GeneratorConfig;
use super::super::table::{Request, ResourceGenerator, select};
use super::{Resources, ScopeKey, scope_key};
use crate::proxy::InterceptionMode;
use std::sync::Arc;

pub(super) struct SidecarListeners {
    cache: TypeCache<(ScopeKey, u8, Option<String>), Resources>,
}

fn mode_key(mode: InterceptionMode) -> u8 {
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
        let proxy = req.proxy;
        let bound_ip = (proxy.interception == InterceptionMode::None).then(|| proxy.ip.clone());
        let key = (scope_key(req.scope), mode_key(proxy.interception), bound_ip);
        let all = self.cache.get_or_build(
            key,
            |_| true,
            || {
                let opts = ListenerOptions {
                    mode: proxy.interception,
                    proxy_ip: &proxy.ip,
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
