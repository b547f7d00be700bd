//! CDS for proxyless gRPC clients: the clusters they name (`outbound|<port>|<subset>|<host>`,
//! as their routes reference them), EDS over ADS, with the parts of the DestinationRule
//! policy gRPC implements: the load balancer (round robin, least request, ring hash) and
//! the request limit (gRFC A32), as Istio's `grpcgen` gives them; and the mesh's mTLS
//! where the client can speak it ([`super::security::client`]).

use super::super::super::XdsResource;
use super::super::super::cache::{TypeCache, TypeStats};
use super::super::super::util::{ads_config_source, resource, u32_value};
use super::super::GeneratorConfig;
use super::super::table::{Request, ResourceGenerator};
use super::names::ClusterKey;
use super::security::client::{self, Client, ClientTransport, ClusterTarget};
use super::security::xds_credentials;
use super::{NamesKey, Resources, names_key, warn_all};
use crate::xds::endpoints::EndpointFilter;
use envoy_types::pb::envoy::config::cluster::v3::{
    CircuitBreakers, Cluster, circuit_breakers::Thresholds, cluster,
};
use envoy_types::pb::google::protobuf::UInt64Value;
use shoal_proto::model::{Resolution, ServiceEndpoints, ServiceKey};
use shoal_proto::push_context::policy::{self, Policy};
use shoal_proto::push_context::{PushContext, SidecarScope};
use std::sync::Arc;

/// Istio's default ring size for consistent hashing.
const DEFAULT_RING_SIZE: u64 = 1024;
/// The largest ring gRPC accepts (it rejects the cluster above it).
const MAX_RING_SIZE: u64 = 8 * 1024 * 1024;

/// The clusters of one answer, and the endpoint chunks their transports were chosen
/// from (auto mTLS and SANs read the endpoints): current while those are.
#[derive(Clone)]
struct Answer {
    resources: Resources,
    watched: Arc<Vec<(ServiceKey, Option<Arc<ServiceEndpoints>>)>>,
}

pub(super) struct GrpcClusters {
    /// Keyed also by whether the client has xDS credentials.
    cache: TypeCache<(NamesKey, bool), Answer>,
}

impl GrpcClusters {
    pub fn new(config: &GeneratorConfig) -> Self {
        GrpcClusters {
            cache: TypeCache::new(config.scope_cache_capacity),
        }
    }
}

impl ResourceGenerator for GrpcClusters {
    fn generate(&self, req: &Request<'_>, names: &[String]) -> Vec<Arc<XdsResource>> {
        // Only named clusters exist for gRPC, as in Istio: none for a wildcard request.
        if names.is_empty() {
            return Vec::new();
        }
        let (scope, push) = (req.scope, req.push);
        let client = Client {
            id: &req.proxy.id,
            xds_credentials: xds_credentials(req.proxy),
        };
        let fresh = |a: &Answer| {
            a.watched
                .iter()
                .all(|(key, chunk)| match (chunk, push.endpoints(key)) {
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                    (None, None) => true,
                    _ => false,
                })
        };
        let answer = self.cache.get_or_build(
            (names_key(scope, names), client.xds_credentials),
            fresh,
            || {
                let mut warnings = Vec::new();
                let mut watched = Vec::new();
                let built = names
                    .iter()
                    .filter_map(|name| {
                        let c = build(scope, push, client, name, &mut watched, &mut warnings)?;
                        Some(resource(name.clone(), &c))
                    })
                    .collect();
                warn_all(&warnings);
                watched.sort();
                watched.dedup();
                Answer {
                    resources: Arc::new(built),
                    watched: Arc::new(
                        watched
                            .into_iter()
                            .map(|k| {
                                let chunk = push.endpoints(&k).cloned();
                                (k, chunk)
                            })
                            .collect(),
                    ),
                }
            },
        );
        answer.resources.to_vec()
    }

    fn stats(&self) -> TypeStats {
        self.cache.stats()
    }
}

/// The cluster `name` asks for, if it is a port (and subset) of a service of the scope
/// (and its transport one `client` can use); `watched` gets the services whose
/// endpoints it was chosen from.
fn build(
    scope: &SidecarScope,
    push: &PushContext,
    client: Client<'_>,
    name: &str,
    watched: &mut Vec<ServiceKey>,
    warnings: &mut Vec<String>,
) -> Option<Cluster> {
    let Some(key) = ClusterKey::parse(name) else {
        tracing::debug!(cluster = name, "not an outbound cluster name");
        return None;
    };
    let svc = scope.service(key.host);
    let port = svc.and_then(|s| {
        s.ports
            .iter()
            .find(|p| p.port == key.port && p.protocol.is_proxied())
    });
    let rule = scope.destination_rule(key.host);
    let subset = match key.subset {
        "" => Some(None),
        wanted => rule
            .and_then(|r| r.spec.subsets.iter().find(|s| s.name == wanted))
            .map(Some),
    };
    let (Some(svc), Some(port), Some(subset)) = (svc, port, subset) else {
        tracing::debug!(
            cluster = name,
            scope = scope.id.as_str(),
            "proxyless gRPC cluster names no service port (or subset) visible to the client"
        );
        return None;
    };
    if svc.resolution != Resolution::ClientSideLb {
        warnings.push(format!(
            "cluster {name}: {} is not load balanced over registry endpoints ({:?}); proxyless gRPC clients are given EDS clusters only",
            svc.hostname, svc.resolution
        ));
        return None;
    }
    let mut c = Cluster {
        name: name.to_string(),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Eds as i32,
        )),
        eds_cluster_config: Some(cluster::EdsClusterConfig {
            eds_config: Some(ads_config_source()),
            service_name: name.to_string(),
        }),
        ..Default::default()
    };
    let policy = policy::effective(rule.map(|r| &r.spec), subset, port.port);
    let owner = rule.map_or(String::new(), |r| {
        format!("DestinationRule {}/{}: ", r.namespace, r.name)
    });
    apply_load_balancer(&mut c, policy, &owner, warnings);
    apply_request_limit(&mut c, policy);
    let filter = EndpointFilter {
        port: port.port,
        labels: subset.map(|s| s.labels.clone()),
    };
    let target = ClusterTarget {
        name,
        service: svc,
        filter: &filter,
        tls: policy.tls,
        owner: &owner,
    };
    match client::transport(target, client, push, watched, warnings) {
        ClientTransport::Plaintext => {}
        ClientTransport::MutualTls(socket) => c.transport_socket = Some(socket),
        ClientTransport::Refused => return None,
    }
    Some(c)
}

/// Round robin (gRPC's default, so left unset), least request, or a ring hash; other
/// policies gRPC does not implement and would reject the cluster for.
fn apply_load_balancer(
    c: &mut Cluster,
    policy: Policy<'_>,
    owner: &str,
    warnings: &mut Vec<String>,
) {
    use cluster::LbPolicy;
    let Some(lb) = policy.load_balancer else {
        return;
    };
    if let Some(hash) = &lb.consistent_hash {
        let wanted = hash.minimum_ring_size.filter(|v| *v > 0);
        let size = wanted.unwrap_or(DEFAULT_RING_SIZE).min(MAX_RING_SIZE);
        if wanted.is_some_and(|w| w > MAX_RING_SIZE) {
            warnings.push(format!(
                "{owner}cluster {}: minimumRingSize {} is above gRPC's limit, {MAX_RING_SIZE} used",
                c.name,
                wanted.unwrap_or_default()
            ));
        }
        c.lb_policy = LbPolicy::RingHash as i32;
        c.lb_config = Some(cluster::LbConfig::RingHashLbConfig(
            cluster::RingHashLbConfig {
                minimum_ring_size: Some(UInt64Value { value: size }),
                ..Default::default()
            },
        ));
        return;
    }
    match lb.simple.as_deref().unwrap_or("") {
        "" | "ROUND_ROBIN" => {}
        "LEAST_REQUEST" | "LEAST_CONN" => c.lb_policy = LbPolicy::LeastRequest as i32,
        other => warnings.push(format!(
            "{owner}cluster {}: load balancer {other} is not supported by proxyless gRPC, round robin used",
            c.name
        )),
    }
}

/// `http2MaxRequests` as the cluster's request limit: the only circuit breaker gRPC
/// implements.
fn apply_request_limit(c: &mut Cluster, policy: Policy<'_>) {
    let max = policy
        .connection_pool
        .and_then(|p| p.http.as_ref())
        .and_then(|h| h.http2_max_requests)
        .and_then(|v| u32::try_from(v).ok())
        .filter(|v| *v > 0);
    if let Some(max) = max {
        c.circuit_breakers = Some(CircuitBreakers {
            thresholds: vec![Thresholds {
                max_requests: Some(u32_value(max)),
                ..Default::default()
            }],
            ..Default::default()
        });
    }
}
