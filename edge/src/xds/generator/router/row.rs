//! A cached router row: LDS or RDS, built per [`RouterKey`] by a function of the
//! request and the router's merged Gateways.

use super::super::super::XdsResource;
use super::super::super::cache::{TypeCache, TypeStats};
use super::super::super::security::jwt;
use super::super::GeneratorConfig;
use super::super::table::{Request, ResourceGenerator, select};
use super::super::warnings::Warnings;
use super::{RouterKey, router_key};
use shoal_proto::push_context::gateway::MergedGateway;
use std::sync::Arc;

/// Builds a router's resources of one type, sorted by name, with warnings.
pub(super) type Build = fn(&Request<'_>, &MergedGateway) -> (Vec<Arc<XdsResource>>, Vec<String>);

pub(super) struct RouterRow {
    cache: TypeCache<RouterKey, Arc<Vec<Arc<XdsResource>>>>,
    warnings: Arc<Warnings>,
    build: Build,
}

impl RouterRow {
    pub fn new(config: &GeneratorConfig, warnings: Arc<Warnings>, build: Build) -> Self {
        RouterRow {
            cache: TypeCache::new(config.scope_cache_capacity),
            warnings,
            build,
        }
    }
}

impl ResourceGenerator for RouterRow {
    fn generate(&self, req: &Request<'_>, names: &[String]) -> Vec<Arc<XdsResource>> {
        let ports = req.push.service_instances().gateway_ports(&req.proxy.ip);
        let authn = (req.push.index().security)
            .request_authentication(&req.proxy.namespace, &req.proxy.labels);
        let jwks_version = jwt::keys_version(&authn, req.jwks);
        let all = self.cache.get_or_build(
            router_key(req.scope, &req.proxy.labels, ports.clone(), jwks_version),
            |_| true,
            || {
                let merged = MergedGateway::for_router(req.push.index(), &req.proxy.labels, &ports);
                let (built, warnings) = (self.build)(req, &merged);
                self.warnings.warn_once(&warnings);
                Arc::new(built)
            },
        );
        select(&all, names)
    }

    fn stats(&self) -> TypeStats {
        self.cache.stats()
    }
}
