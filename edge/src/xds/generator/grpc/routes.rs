//! RDS for proxyless gRPC clients: per route name `outbound|<port>||<host>` (as their
//! listeners name it), one virtual host with the service's routes, made by the sidecar
//! route translation and then cut to what gRPC implements.

use super::super::super::XdsResource;
use super::super::super::cache::{TypeCache, TypeStats};
use super::super::super::routes::{self, FAULT_FILTER};
use super::super::super::util::resource;
use super::super::GeneratorConfig;
use super::super::table::{Request, ResourceGenerator};
use super::names::ClusterKey;
use super::{NamesKey, Resources, names_key, warn_all};
use envoy_types::pb::envoy::config::route::v3::{
    RouteConfiguration, VirtualHost, route, route_action,
};
use shoal_proto::push_context::SidecarScope;
use std::collections::BTreeMap;
use std::sync::Arc;

pub(super) struct GrpcRoutes {
    /// Keyed also by the client's labels when a VirtualService of the scope matches on
    /// `sourceLabels`, as the sidecars' routes are.
    cache: TypeCache<(NamesKey, Option<BTreeMap<String, String>>), Resources>,
}

impl GrpcRoutes {
    pub fn new(config: &GeneratorConfig) -> Self {
        GrpcRoutes {
            cache: TypeCache::new(config.scope_cache_capacity),
        }
    }
}

impl ResourceGenerator for GrpcRoutes {
    fn generate(&self, req: &Request<'_>, names: &[String]) -> Vec<Arc<XdsResource>> {
        let (scope, proxy) = (req.scope, req.proxy);
        let labels = routes::uses_source_labels(scope).then(|| proxy.labels.clone());
        let all = self.cache.get_or_build(
            (names_key(scope, names), labels),
            |_| true,
            || {
                let mut warnings = Vec::new();
                let built = names
                    .iter()
                    .filter_map(|name| {
                        let config = route_config(scope, name, &proxy.labels, &mut warnings)?;
                        Some(resource(name.clone(), &config))
                    })
                    .collect();
                warnings.sort();
                warnings.dedup();
                warn_all(&warnings);
                Arc::new(built)
            },
        );
        // Only named route configurations exist for gRPC, as in Istio: none for a
        // wildcard request.
        all.to_vec()
    }

    fn stats(&self) -> TypeStats {
        self.cache.stats()
    }
}

/// The configuration `name` (`outbound|<port>||<host>`) asks for, if the host is a
/// service of the scope with that port.
pub(super) fn route_config(
    scope: &SidecarScope,
    name: &str,
    labels: &BTreeMap<String, String>,
    warnings: &mut Vec<String>,
) -> Option<RouteConfiguration> {
    let key = ClusterKey::parse(name);
    let svc = key.and_then(|k| {
        scope
            .service(k.host)
            .filter(|s| s.ports.iter().any(|p| p.port == k.port))
    });
    let (Some(key), Some(svc)) = (key, svc) else {
        tracing::debug!(
            route = name,
            scope = scope.id.as_str(),
            "proxyless gRPC route name names no service port visible to the client"
        );
        return None;
    };
    let vhost = routes::service_virtual_host(scope, svc, key.port, labels, warnings);
    Some(RouteConfiguration {
        name: name.to_string(),
        virtual_hosts: vec![for_grpc(vhost)],
        ..Default::default()
    })
}

/// Cuts a sidecar's virtual host to what gRPC reads: per-route configuration only for
/// the filters gRPC implements (it rejects a whole configuration naming another, e.g.
/// CORS), and the route timeout as `max_stream_duration` (gRFC A31: gRPC ignores
/// `timeout`), as Istio does for proxyless clients.
fn for_grpc(mut vhost: VirtualHost) -> VirtualHost {
    for r in &mut vhost.routes {
        r.typed_per_filter_config
            .retain(|filter, _| filter == FAULT_FILTER);
        if let Some(route::Action::Route(action)) = &mut r.action {
            action.max_stream_duration =
                action
                    .timeout
                    .map(|timeout| route_action::MaxStreamDuration {
                        max_stream_duration: Some(timeout),
                        ..Default::default()
                    });
        }
    }
    vhost
}
