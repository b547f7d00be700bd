//! RDS for routers.

use super::super::super::XdsResource;
use super::super::super::cache::{TypeCache, TypeStats};
use super::super::super::gateway::routes::{self, RouteContext};
use super::super::super::util::resource;
use super::super::GeneratorConfig;
use super::super::table::{Request, ResourceGenerator, select};
use super::super::warnings::Warnings;
use super::{RouterKey, router_key};
use shoal_proto::push_context::gateway::MergedGateway;
use std::sync::Arc;

pub(super) struct RouterRoutes {
    cache: TypeCache<RouterKey, Arc<Vec<Arc<XdsResource>>>>,
    warnings: Arc<Warnings>,
}

impl RouterRoutes {
    pub fn new(config: &GeneratorConfig, warnings: Arc<Warnings>) -> Self {
        RouterRoutes {
            cache: TypeCache::new(config.scope_cache_capacity),
            warnings,
        }
    }
}

impl ResourceGenerator for RouterRoutes {
    fn generate(&self, req: &Request<'_>, names: &[String]) -> Vec<Arc<XdsResource>> {
        let proxy = req.proxy;
        let all = self.cache.get_or_build(
            router_key(req.scope, &proxy.labels),
            |_| true,
            || {
                let index = req.push.index();
                let merged = MergedGateway::for_router(index, &proxy.labels);
                let ctx = RouteContext {
                    index,
                    scope: req.scope,
                    namespace: &proxy.namespace,
                    labels: &proxy.labels,
                };
                let (built, warnings) = routes::build(&ctx, &merged);
                self.warnings.warn_once(&warnings);
                Arc::new(built.iter().map(|r| resource(r.name.clone(), r)).collect())
            },
        );
        select(&all, names)
    }

    fn stats(&self) -> TypeStats {
        self.cache.stats()
    }
}
