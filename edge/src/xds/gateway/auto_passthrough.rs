//! An east-west gateway's `AUTO_PASSTHROUGH` servers, as Istio's multi-network install
//! runs them (`builtAutoPassthroughFilterChains`, `buildOutboundSniDnatClusters`):
//!
//! ```text
//!  sidecar on net-1 ── mTLS, SNI outbound_.9080_._.reviews.shop.svc.cluster.local ──►
//!   gateway 0.0.0.0_15443 (tls_inspector)
//!     chain: SNI outbound_.9080_._.reviews…, ALPN istio-* ─ tcp_proxy ─┐ still encrypted
//!     chain: SNI outbound_.9080_.v1_.reviews… (a DestinationRule subset)│
//!   cluster outbound_.9080_._.reviews… (EDS, no TLS of its own) ◄──────┘
//!     └─ reviews' endpoints on the gateway's own network ──► their sidecars (mTLS ends)
//! ```
//!
//! One filter chain and one SNI-DNAT cluster per (service, port, subset) the router's
//! scope sees whose host one of the servers' hosts matches (`*.local`: every Kubernetes
//! service): a gateway's size grows with the mesh it fronts, never beyond it; a Sidecar in
//! the gateway's namespace, or narrower server hosts, cut it down. The chains match
//! Istio's mTLS ALPNs as well as the SNI, so only a sidecar's mTLS is forwarded, and
//! carry no authorization: the gateway cannot read the mTLS it forwards (the destination
//! sidecar enforces its own policies).
//!
//! Only registry services (EDS) get a cluster: a DNS or passthrough service's name is
//! not routable by SNI through a gateway; mesh-external services and wildcard hosts
//! (not an SNI) are never forwarded.

use crate::xds::clusters::traffic_policy::{
    apply_connection_pool, apply_load_balancer, apply_outlier_detection,
};
use crate::xds::clusters::{ClusterDefaults, EdsTarget};
use crate::xds::endpoints::EndpointFilter;
use crate::xds::endpoints::locality::LocalityLb;
use crate::xds::listeners::tcp_proxy_filter;
use crate::xds::util::{TLS_TRANSPORT, ads_config_source, duration, mesh_sni};
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, FilterChainMatch};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::tcp_proxy;
use shoal_proto::config::istio::{DestinationRule, Subset};
use shoal_proto::model::{Protocol, Resolution, Service, ServicePort, host_matches};
use shoal_proto::push_context::SidecarScope;
use shoal_proto::push_context::gateway::{GatewayPort, MergedGateway, PortKind};
use shoal_proto::push_context::policy::{self, Policy};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Every ALPN an Istio sidecar's mTLS offers (Istio's `allIstioMtlsALPNs`): the
/// gateway forwards any sidecar's, Shoal's or istiod's (whose TCP also offers
/// `istio-peer-exchange`), and nothing else.
const ISTIO_MTLS_ALPNS: [&str; 5] = [
    "istio-peer-exchange",
    "istio",
    "istio-http/1.0",
    "istio-http/1.1",
    "istio-h2",
];

/// One (service, port, subset) an `AUTO_PASSTHROUGH` server forwards to.
pub struct SniTarget<'a> {
    /// The SNI it is reached by, which is also its SNI-DNAT cluster's name.
    pub name: String,
    pub service: &'a Arc<Service>,
    pub port: &'a ServicePort,
    pub subset: Option<&'a Subset>,
    rule: Option<&'a DestinationRule>,
}

impl SniTarget<'_> {
    fn policy(&self) -> Policy<'_> {
        policy::effective(self.rule, self.subset, self.port.port)
    }
}

/// The SNI-DNAT clusters of a router, and what EDS needs to answer for them.
#[derive(Debug, Default)]
pub struct SniDnat {
    /// Sorted by name (each its SNI).
    pub clusters: Vec<Cluster>,
    /// Every cluster's endpoints, by name.
    pub eds: BTreeMap<String, EdsTarget>,
}

/// The hosts of the `AUTO_PASSTHROUGH` servers on `port` (without their namespaces, as
/// Istio matches services by them).
pub fn port_hosts(port: &GatewayPort) -> Vec<String> {
    if port.kind != PortKind::AutoPassthrough {
        return Vec::new();
    }
    let mut hosts: Vec<String> = port
        .servers
        .iter()
        .flat_map(|s| s.bare_hosts().map(str::to_string).collect::<Vec<_>>())
        .collect();
    hosts.sort();
    hosts.dedup();
    hosts
}

/// The hosts of every `AUTO_PASSTHROUGH` server of the router; empty when it has none.
pub fn server_hosts(merged: &MergedGateway) -> Vec<String> {
    let mut hosts: Vec<String> = merged.ports.iter().flat_map(port_hosts).collect();
    hosts.sort();
    hosts.dedup();
    hosts
}

/// What the services of `scope` that one of `hosts` matches are reached by, sorted by
/// name.
pub fn targets<'a>(scope: &'a SidecarScope, hosts: &[String]) -> Vec<SniTarget<'a>> {
    let mut out = Vec::new();
    if hosts.is_empty() {
        return out;
    }
    let matched = scope.services.iter().filter(|svc| {
        !svc.mesh_external
            && svc.resolution == Resolution::ClientSideLb
            && !svc.hostname.contains('*')
            && hosts.iter().any(|h| host_matches(h, &svc.hostname))
    });
    for service in matched {
        let rule = scope.destination_rule(&service.hostname).map(|r| &r.spec);
        for port in service.ports.iter().filter(|p| p.protocol.is_proxied()) {
            let subsets = std::iter::once(None)
                .chain(rule.into_iter().flat_map(|r| r.subsets.iter()).map(Some));
            for subset in subsets {
                let target = SniTarget {
                    name: mesh_sni(
                        port.port,
                        subset.map_or("", |s| s.name.as_str()),
                        &service.hostname,
                    ),
                    service,
                    port,
                    subset,
                    rule,
                };
                let lb = target.policy().load_balancer;
                if lb.and_then(|l| l.simple.as_deref()) == Some("PASSTHROUGH") {
                    // Its clients send to the original destination: nothing to DNAT.
                    continue;
                }
                out.push(target);
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    out
}

/// The SNI-DNAT cluster of each target: EDS, the rule's traffic policy but its TLS (the
/// client's mTLS passes through) and only TCP's part of its pool (the gateway speaks no
/// HTTP here).
pub fn clusters(targets: &[SniTarget<'_>], defaults: &ClusterDefaults) -> SniDnat {
    let mut out = SniDnat::default();
    for target in targets {
        let mut c = Cluster {
            name: target.name.clone(),
            connect_timeout: Some(duration(defaults.connect_timeout)),
            cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
                cluster::DiscoveryType::Eds as i32,
            )),
            eds_cluster_config: Some(cluster::EdsClusterConfig {
                eds_config: Some(ads_config_source()),
                service_name: target.name.clone(),
            }),
            ..Default::default()
        };
        let policy = target.policy();
        apply_connection_pool(&mut c, policy, Protocol::Tcp, None);
        apply_outlier_detection(&mut c, policy);
        apply_load_balancer(&mut c, policy);
        out.eds.insert(
            target.name.clone(),
            EdsTarget {
                service: target.service.clone(),
                filter: EndpointFilter {
                    port: target.port.port,
                    labels: target.subset.map(|s| s.labels.clone()),
                },
                // Its own network's pods only (the EDS view has no gateways), without
                // locality preference, as Istio's SNI-DNAT clusters.
                locality_lb: LocalityLb::Off,
            },
        );
        out.clusters.push(c);
    }
    out
}

/// A filter chain per target: its SNI and any of Istio's mTLS ALPNs, to a tcp_proxy onto
/// its SNI-DNAT cluster.
pub fn chains(targets: &[SniTarget<'_>]) -> Vec<FilterChain> {
    let alpns: Vec<String> = ISTIO_MTLS_ALPNS.iter().map(|a| a.to_string()).collect();
    targets
        .iter()
        .map(|t| FilterChain {
            name: t.name.clone(),
            filter_chain_match: Some(FilterChainMatch {
                server_names: vec![t.name.clone()],
                transport_protocol: TLS_TRANSPORT.into(),
                application_protocols: alpns.clone(),
                ..Default::default()
            }),
            filters: vec![tcp_proxy_filter(
                &t.name,
                tcp_proxy::ClusterSpecifier::Cluster(t.name.clone()),
            )],
            ..Default::default()
        })
        .collect()
}

#[cfg(test)]
mod tests;
