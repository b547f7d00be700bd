//! LDS for routers.

use super::super::super::XdsResource;
use super::super::super::cache::{TypeCache, TypeStats};
use super::super::super::gateway::listeners::{self, RouterContext};
use super::super::super::util::resource;
use super::super::GeneratorConfig;
use super::super::table::{Request, ResourceGenerator, select};
use super::super::warnings::Warnings;
use super::{RouterKey, router_key};
use shoal_proto::push_context::gateway::MergedGateway;
use std::sync::Arc;

pub(super) struct RouterListeners {
    cache: TypeCache<RouterKey, Arc<Vec<Arc<XdsResource>>>>,
    warnings: Arc<Warnings>,
}

impl RouterListeners {
    pub fn new(config: &GeneratorConfig, warnings: Arc<Warnings>) -> Self {
        RouterListeners {
            cache: TypeCache::new(config.scope_cache_capacity),
            warnings,
        }
    }
}

impl ResourceGenerator for RouterListeners {
    fn generate(&self, req: &Request<'_>, names: &[String]) -> Vec<Arc<XdsResource>> {
        let proxy = req.proxy;
        let all = self.cache.get_or_build(
            router_key(req.scope, &proxy.labels),
            |_| true,
            || {
                let index = req.push.index();
                let merged = MergedGateway::for_router(index, &proxy.labels);
                let ctx = RouterContext {
                    index,
                    scope: req.scope,
                    namespace: &proxy.namespace,
                };
                let (built, warnings) = listeners::build(&ctx, &merged);
                self.warnings.warn_once(&warnings);
                Arc::new(built.iter().map(|l| resource(l.name.clone(), l)).collect())
            },
        );
        select(&all, names)
    }

    fn stats(&self) -> TypeStats {
        self.cache.stats()
    }
}
