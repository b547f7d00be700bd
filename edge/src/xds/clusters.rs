//! CDS: the outbound clusters of a scope, as Istio's `ClusterBuilder` makes them.
//!
//! For each visible service and port `outbound|<port>||<host>`, and one more per subset of
//! the DestinationRule that applies, `outbound|<port>|<subset>|<host>`. Registry services
//! are EDS clusters served over ADS; DNS services are STRICT_DNS with their endpoints
//! inline; passthrough services forward to the original destination. Plus the catch-alls
//! `BlackHoleCluster` and `PassthroughCluster` (and `InboundPassthroughCluster` when
//! traffic is captured). The inbound clusters are made in [`inbound`].

pub mod inbound;
pub(crate) mod traffic_policy;

use super::endpoints::locality::LocalityLb;
use super::endpoints::{EndpointFilter, by_locality};
use super::security::outbound;
use super::util::{
    BLACKHOLE_CLUSTER, INBOUND_PASSTHROUGH_BIND, INBOUND_PASSTHROUGH_CLUSTER, PASSTHROUGH_CLUSTER,
    ads_config_source, any, cluster_name, duration, mesh_sni, socket_address,
};
use envoy_types::pb::envoy::config::cluster::v3::{CircuitBreakers, Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{
    BindConfig, Http1ProtocolOptions, Http2ProtocolOptions,
};
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    HttpProtocolOptions, http_protocol_options,
};
use prost::Name;
use shoal_proto::config::istio::{self, DestinationRule};
use shoal_proto::model::{Endpoint, Protocol, Resolution, Service, ServiceKey, ServicePort};
use shoal_proto::push_context::policy;
use shoal_proto::push_context::{PushContext, SidecarScope};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use traffic_policy::{
    apply_connection_pool, apply_load_balancer, apply_outlier_detection, default_thresholds,
};

/// Defaults Istio takes from MeshConfig.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterDefaults {
    /// MeshConfig `connectTimeout`.
    pub connect_timeout: Duration,
}

impl Default for ClusterDefaults {
    fn default() -> Self {
        ClusterDefaults {
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// Where the endpoints of one EDS cluster come from.
#[derive(Clone, Debug)]
pub struct EdsTarget {
    pub service: Arc<Service>,
    pub filter: EndpointFilter,
    pub locality_lb: LocalityLb,
}

/// The clusters of a scope, and what EDS needs to answer for them.
#[derive(Debug, Default)]
pub struct ScopeClusters {
    /// Sorted by name.
    pub clusters: Vec<Cluster>,
    /// The EDS-typed clusters, by name.
    pub eds: BTreeMap<String, EdsTarget>,
    /// DNS services whose endpoints were inlined: the output changes when their endpoints do.
    pub dns_services: Vec<ServiceKey>,
    /// Services whose clusters verify their endpoints' identities (mTLS SANs), with the
    /// SPIFFE IDs used: the output changes when those do.
    pub identities: BTreeMap<ServiceKey, Vec<String>>,
}

/// What one cluster of a scope is made from.
enum ClusterSource<'a> {
    Outbound {
        svc: &'a Arc<Service>,
        port: &'a ServicePort,
        rule: Option<&'a DestinationRule>,
        subset: Option<&'a istio::Subset>,
    },
    Blackhole,
    Passthrough,
    InboundPassthrough,
}

/// What of the proxy its outbound clusters depend on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ClusterOptions {
    /// Its traffic is captured: the cluster `virtualInbound` forwards to is added.
    pub inbound_passthrough: bool,
    /// It has the mesh's identity (an agent serves it its certificate): auto mTLS
    /// applies. A proxy without one has no certificate to present, and no `sds-grpc`.
    pub mesh_identity: bool,
}

/// Every cluster of `scope` for a proxy with `options`.
///
/// Clusters are kilobytes each, so they are built in name order rather than built and
/// then sorted: a scope of thousands would otherwise spend its time moving them.
pub fn build(
    scope: &SidecarScope,
    push: &PushContext,
    defaults: &ClusterDefaults,
    options: ClusterOptions,
) -> ScopeClusters {
    let mut out = ScopeClusters::default();
    let mut sources: Vec<(String, ClusterSource<'_>)> = Vec::new();
    for svc in &scope.services {
        let rule = scope.destination_rule(&svc.hostname).map(|r| &r.spec);
        if svc.resolution.is_dns() {
            out.dns_services.push(svc.key());
        }
        for port in svc.ports.iter().filter(|p| p.protocol.is_proxied()) {
            let subsets = std::iter::once(None)
                .chain(rule.into_iter().flat_map(|r| r.subsets.iter()).map(Some));
            for subset in subsets {
                let name = cluster_name(
                    port.port,
                    subset.map_or("", |s| s.name.as_str()),
                    &svc.hostname,
                );
                let source = ClusterSource::Outbound {
                    svc,
                    port,
                    rule,
                    subset,
                };
                sources.push((name, source));
            }
        }
    }
    sources.push((BLACKHOLE_CLUSTER.into(), ClusterSource::Blackhole));
    sources.push((PASSTHROUGH_CLUSTER.into(), ClusterSource::Passthrough));
    if options.inbound_passthrough {
        sources.push((
            INBOUND_PASSTHROUGH_CLUSTER.into(),
            ClusterSource::InboundPassthrough,
        ));
    }
    // Stable: of clusters with one name, the first made is kept (and, for EDS, the
    // last made is the target), as when they were made in this order.
    sources.sort_by(|a, b| a.0.cmp(&b.0));
    let ctx = BuildContext {
        push,
        defaults,
        mesh_identity: options.mesh_identity,
    };
    out.clusters.reserve_exact(sources.len());
    for (name, source) in sources {
        let built = match source {
            ClusterSource::Outbound {
                svc,
                port,
                rule,
                subset,
            } => outbound(name, svc, port, rule, subset, &ctx).map(|(c, eds, ids)| {
                if let Some(ids) = ids {
                    out.identities.insert(svc.key(), ids);
                }
                if let Some((filter, locality_lb)) = eds {
                    out.eds.insert(
                        c.name.clone(),
                        EdsTarget {
                            service: svc.clone(),
                            filter,
                            locality_lb,
                        },
                    );
                }
                c
            }),
            ClusterSource::Blackhole => Some(blackhole(defaults)),
            ClusterSource::Passthrough => Some(passthrough(defaults, PASSTHROUGH_CLUSTER)),
            ClusterSource::InboundPassthrough => Some(inbound_passthrough_cluster(defaults)),
        };
        if let Some(c) = built
            && out.clusters.last().is_none_or(|last| last.name != c.name)
        {
            out.clusters.push(c);
        }
    }
    out
}

pub(super) fn discovery(t: cluster::DiscoveryType) -> Option<cluster::ClusterDiscoveryType> {
    Some(cluster::ClusterDiscoveryType::Type(t as i32))
}

/// One outbound cluster, and its endpoint filter and locality load balancing when it is
/// EDS-typed, and the destination identities its mTLS verifies. `None` when the cluster
/// cannot exist (a DNS service with neither endpoints nor a resolvable name).
fn outbound(
    name: String,
    svc: &Service,
    port: &ServicePort,
    rule: Option<&DestinationRule>,
    subset: Option<&istio::Subset>,
    ctx: &BuildContext<'_>,
) -> Option<OutboundCluster> {
    let BuildContext {
        push,
        defaults,
        mesh_identity,
    } = *ctx;
    let filter = EndpointFilter {
        port: port.port,
        labels: subset.map(|s| s.labels.clone()),
    };
    let mut c = Cluster {
        name: name.clone(),
        connect_timeout: Some(duration(defaults.connect_timeout)),
        ..Default::default()
    };
    let mut eds = None;
    match svc.resolution {
        Resolution::ClientSideLb => {
            c.cluster_discovery_type = discovery(cluster::DiscoveryType::Eds);
            c.eds_cluster_config = Some(cluster::EdsClusterConfig {
                eds_config: Some(ads_config_source()),
                service_name: name.clone(),
            });
            eds = Some(filter);
        }
        Resolution::Dns | Resolution::DnsRoundRobin => {
            let kind = if svc.resolution == Resolution::Dns {
                cluster::DiscoveryType::StrictDns
            } else {
                cluster::DiscoveryType::LogicalDns
            };
            c.cluster_discovery_type = discovery(kind);
            c.dns_lookup_family = cluster::DnsLookupFamily::V4Only as i32;
            c.load_assignment = Some(dns_assignment(&name, svc, port, &filter, push)?);
        }
        Resolution::Passthrough => {
            c.cluster_discovery_type = discovery(cluster::DiscoveryType::OriginalDst);
        }
    }

    let policy = policy::effective(rule, subset, port.port);
    let h2 = matches!(port.protocol, Protocol::Http2 | Protocol::Grpc);
    let index = push.index();
    let sni = mesh_sni(
        port.port,
        subset.map_or("", |s| s.name.as_str()),
        &svc.hostname,
    );
    let target = outbound::ClusterTarget {
        sni: &sni,
        service: svc,
        tls: policy.tls,
        h2,
        http: port.protocol.is_http(),
    };
    let mesh = outbound::MeshSecurity {
        mesh: &index.mesh,
        policies: &index.security,
        client_identity: mesh_identity,
    };
    let mut ids = None;
    let transport = outbound::cluster_transport(target, mesh, || {
        let found = identities(svc, push, index.mesh.trust_domain());
        ids = Some(found.clone());
        found
    });
    let auto_sni = transport.auto_sni.clone();
    transport.apply(&mut c);
    apply_connection_pool(&mut c, policy, port.protocol, auto_sni);
    apply_outlier_detection(&mut c, policy);
    if apply_load_balancer(&mut c, policy) {
        // A PASSTHROUGH load balancer turned the cluster into ORIGINAL_DST.
        eds = None;
    }
    let locality_lb = LocalityLb::new(
        policy
            .load_balancer
            .and_then(|lb| lb.locality_lb_setting.as_deref()),
        policy.outlier_detection.is_some(),
    );
    if matches!(locality_lb, LocalityLb::Distribute(_)) {
        // Envoy honours the per-locality weights `distribute` sets only with this.
        c.common_lb_config
            .get_or_insert_with(Default::default)
            .locality_config_specifier = Some(
            cluster::common_lb_config::LocalityConfigSpecifier::LocalityWeightedLbConfig(
                Default::default(),
            ),
        );
    }
    Some((c, eds.map(|filter| (filter, locality_lb)), ids))
}

/// What every outbound cluster of one build shares.
#[derive(Clone, Copy)]
struct BuildContext<'a> {
    push: &'a PushContext,
    defaults: &'a ClusterDefaults,
    mesh_identity: bool,
}

/// A built outbound cluster: the cluster, its EDS filter and locality load balancing,
/// the destination identities its mTLS verifies.
type OutboundCluster = (
    Cluster,
    Option<(EndpointFilter, LocalityLb)>,
    Option<Vec<String>>,
);

/// The SPIFFE IDs of a service's workloads: its endpoints' service accounts.
pub fn identities(svc: &Service, push: &PushContext, trust_domain: &str) -> Vec<String> {
    let endpoints = push.endpoints(&svc.key());
    outbound::spiffe_ids(
        trust_domain,
        &svc.namespace,
        endpoints
            .iter()
            .flat_map(|e| e.endpoints.iter())
            .map(|e| e.service_account.as_str()),
    )
}

/// The inline endpoints of a STRICT_DNS cluster. A DNS ServiceEntry without endpoints
/// resolves its own hostname, as Istio does.
fn dns_assignment(
    name: &str,
    svc: &Service,
    port: &ServicePort,
    filter: &EndpointFilter,
    push: &PushContext,
) -> Option<ClusterLoadAssignment> {
    let eps = push.endpoints(&svc.key());
    let mut selected: Vec<&Endpoint> = eps
        .into_iter()
        .flat_map(|e| e.endpoints.iter())
        .filter(|ep| filter.selects(ep))
        .collect();
    let fallback;
    if selected.is_empty() && eps.is_none_or(|e| e.endpoints.is_empty()) {
        if svc.hostname.contains('*') {
            tracing::debug!(
                cluster = name,
                "DNS service with a wildcard host and no endpoints"
            );
            return None;
        }
        // No endpoints: the host itself, or the name an ExternalName Service aliases.
        let target = if svc.external_name.is_empty() {
            &svc.hostname
        } else {
            &svc.external_name
        };
        fallback = Endpoint::at(target.clone(), port.port, port.port);
        selected.push(&fallback);
    }
    if svc.resolution == Resolution::DnsRoundRobin {
        // LOGICAL_DNS takes exactly one endpoint: Istio uses the first.
        selected.sort_by(|a, b| (&a.address, a.port).cmp(&(&b.address, b.port)));
        selected.truncate(1);
    }
    Some(ClusterLoadAssignment {
        cluster_name: name.to_string(),
        endpoints: by_locality(selected.into_iter()),
        ..Default::default()
    })
}

fn blackhole(defaults: &ClusterDefaults) -> Cluster {
    Cluster {
        name: BLACKHOLE_CLUSTER.to_string(),
        cluster_discovery_type: discovery(cluster::DiscoveryType::Static),
        connect_timeout: Some(duration(defaults.connect_timeout)),
        lb_policy: cluster::LbPolicy::RoundRobin as i32,
        ..Default::default()
    }
}

/// An ORIGINAL_DST cluster speaking whatever HTTP version the downstream spoke.
fn passthrough(defaults: &ClusterDefaults, name: &str) -> Cluster {
    let options = HttpProtocolOptions {
        upstream_protocol_options: Some(
            http_protocol_options::UpstreamProtocolOptions::UseDownstreamProtocolConfig(
                http_protocol_options::UseDownstreamHttpConfig {
                    http_protocol_options: Some(Http1ProtocolOptions::default()),
                    http2_protocol_options: Some(Http2ProtocolOptions::default()),
                    ..Default::default()
                },
            ),
        ),
        ..Default::default()
    };
    let mut c = Cluster {
        name: name.to_string(),
        cluster_discovery_type: discovery(cluster::DiscoveryType::OriginalDst),
        connect_timeout: Some(duration(defaults.connect_timeout)),
        lb_policy: cluster::LbPolicy::ClusterProvided as i32,
        circuit_breakers: Some(CircuitBreakers {
            thresholds: vec![default_thresholds()],
            ..Default::default()
        }),
        ..Default::default()
    };
    c.typed_extension_protocol_options
        .insert(HttpProtocolOptions::full_name(), any(&options));
    c
}

/// Inbound passthrough binds 127.0.0.6 so iptables lets its connections out unredirected.
fn inbound_passthrough_cluster(defaults: &ClusterDefaults) -> Cluster {
    Cluster {
        upstream_bind_config: Some(BindConfig {
            source_address: Some(socket_address(INBOUND_PASSTHROUGH_BIND, 0)),
            ..Default::default()
        }),
        ..passthrough(defaults, INBOUND_PASSTHROUGH_CLUSTER)
    }
}

#[cfg(test)]
mod tests;
