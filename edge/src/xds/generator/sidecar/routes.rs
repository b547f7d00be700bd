//! RDS for sidecars: per scope, and per set of proxy labels when a VirtualService of the
//! scope matches on `sourceLabels`.

use super::super::super::XdsResource;
use super::super::super::cache::{TypeCache, TypeStats};
use super::super::super::routes;
use super::super::super::util::resource;
use super::super::GeneratorConfig;
use super::super::table::{Request, ResourceGenerator, select};
use super::{Resources, ScopeKey, Warnings, scope_key};
use std::collections::BTreeMap;
use std::sync::Arc;

pub(super) struct SidecarRoutes {
    cache: TypeCache<(ScopeKey, Option<BTreeMap<String, String>>), Resources>,
    warnings: Arc<Warnings>,
}

impl SidecarRoutes {
    pub fn new(config: &GeneratorConfig, warnings: Arc<Warnings>) -> Self {
        SidecarRoutes {
            cache: TypeCache::new(config.scope_cache_capacity),
            warnings,
        }
    }
}

impl ResourceGenerator for SidecarRoutes {
    fn generate(&self, req: &Request<'_>, names: &[String]) -> Vec<Arc<XdsResource>> {
        let (scope, proxy) = (req.scope, req.proxy);
        let labels = routes::uses_source_labels(scope).then(|| proxy.labels.clone());
        let all = self.cache.get_or_build(
            (scope_key(scope), labels),
            |_| true,
            || {
                let built = routes::build(scope, &proxy.labels);
                self.warnings.warn_once(&built.warnings);
                Arc::new(
                    built
                        .configs
                        .iter()
                        .map(|r| resource(r.name.clone(), r))
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
