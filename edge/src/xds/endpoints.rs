//! EDS: one `ClusterLoadAssignment` per EDS cluster, named like the cluster.
//!
//! The endpoints of the cluster's service that serve its port (and carry its subset's
//! labels); those on another network than the proxy's replaced by that network's
//! gateways ([`network`]); grouped by locality in `region/zone/subzone` order so Envoy's
//! locality-aware balancing sees each locality once, weighted by the sum of its
//! endpoints' weights; then prioritised or weighted for the proxy's locality
//! ([`locality`]).

pub mod locality;
pub mod network;

use super::util::{is_ip, socket_address, u32_value};
use envoy_types::pb::envoy::config::core::v3::{
    Address, HealthStatus, Locality, Metadata, address,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint as EnvoyEndpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind as ValueKind};
use locality::LocalityLb;
use shoal_proto::model::{Endpoint, ServiceEndpoints};
use shoal_proto::push_context::NetworkGateways;
use std::collections::BTreeMap;

/// What of a proxy its assignments depend on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ProxyView {
    /// The proxy's network (node metadata `NETWORK`); empty: none.
    pub network: String,
    /// The proxy's `region/zone/subzone` (the node's locality); empty: unknown.
    pub locality: String,
}

impl ProxyView {
    /// The view an assignment under `policy` depends on: the locality only when the
    /// policy uses it, so that proxies in every locality share one assignment otherwise.
    pub fn for_policy(&self, policy: &LocalityLb) -> ProxyView {
        ProxyView {
            network: self.network.clone(),
            locality: if policy.is_on() {
                self.locality.clone()
            } else {
                String::new()
            },
        }
    }
}

/// What an EDS cluster selects from its service's endpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointFilter {
    /// The service port the cluster is for.
    pub port: u32,
    /// The subset's labels; `None` for the whole service.
    pub labels: Option<BTreeMap<String, String>>,
}

impl EndpointFilter {
    pub fn selects(&self, ep: &Endpoint) -> bool {
        ep.service_port == self.port
            && self
                .labels
                .as_ref()
                .is_none_or(|want| want.iter().all(|(k, v)| ep.labels.get(k) == Some(v)))
    }
}

/// How one EDS cluster's assignment is made for a proxy.
#[derive(Clone, Copy, Debug)]
pub struct AssignmentInput<'a> {
    pub filter: &'a EndpointFilter,
    pub locality_lb: &'a LocalityLb,
    pub view: &'a ProxyView,
    pub gateways: &'a NetworkGateways,
}

/// The assignment of an EDS cluster for a proxy: its ready endpoints. Endpoints whose
/// address is not an IP are left out: Envoy rejects the whole assignment over one
/// hostname.
pub fn load_assignment(
    cluster: &str,
    endpoints: Option<&ServiceEndpoints>,
    input: AssignmentInput<'_>,
) -> ClusterLoadAssignment {
    let selected = endpoints
        .into_iter()
        .flat_map(|e| e.endpoints.iter())
        // Not-ready endpoints are left out, as Istio leaves them out by default
        // (PILOT_SEND_UNHEALTHY_ENDPOINTS off), rather than sent as UNHEALTHY.
        .filter(|ep| ep.healthy && input.filter.selects(ep));
    let reachable = network::reachable(selected, &input.view.network, input.gateways);
    let addressable = reachable.iter().map(|ep| &**ep).filter(|ep| {
        let ok = is_ip(&ep.address);
        if !ok {
            tracing::debug!(cluster, address = %ep.address, "skipping non-IP EDS endpoint");
        }
        ok
    });
    let mut groups = by_locality(addressable);
    input.locality_lb.apply(&input.view.locality, &mut groups);
    ClusterLoadAssignment {
        cluster_name: cluster.to_string(),
        endpoints: groups,
        ..Default::default()
    }
}

/// Groups endpoints by locality, sorted by locality then by address for a stable encoding.
pub fn by_locality<'a>(endpoints: impl Iterator<Item = &'a Endpoint>) -> Vec<LocalityLbEndpoints> {
    let mut groups: BTreeMap<&str, Vec<&Endpoint>> = BTreeMap::new();
    for ep in endpoints {
        groups.entry(ep.locality.as_str()).or_default().push(ep);
    }
    groups
        .into_iter()
        .map(|(locality, mut eps)| {
            eps.sort_by(|a, b| (&a.address, a.port).cmp(&(&b.address, b.port)));
            let weight: u32 = eps.iter().map(|e| weight(e)).fold(0, u32::saturating_add);
            LocalityLbEndpoints {
                locality: Some(parse_locality(locality)),
                lb_endpoints: eps.into_iter().map(lb_endpoint).collect(),
                load_balancing_weight: Some(u32_value(weight)),
                ..Default::default()
            }
        })
        .collect()
}

/// An endpoint without a weight counts once, as in Istio.
fn weight(ep: &Endpoint) -> u32 {
    ep.weight.max(1)
}

fn lb_endpoint(ep: &Endpoint) -> LbEndpoint {
    let health = if ep.healthy {
        HealthStatus::Healthy
    } else {
        HealthStatus::Unhealthy
    };
    LbEndpoint {
        host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(EnvoyEndpoint {
            address: Some(Address {
                address: Some(address::Address::SocketAddress(socket_address(
                    &ep.address,
                    ep.port,
                ))),
            }),
            ..Default::default()
        })),
        health_status: health as i32,
        load_balancing_weight: Some(u32_value(weight(ep))),
        metadata: transport_socket_match(ep),
    }
}

/// `envoy.transport_socket_match: {tlsMode: istio}` for a workload with a sidecar (its
/// `security.istio.io/tlsMode` label), which auto mTLS reaches over the mesh's mTLS.
fn transport_socket_match(ep: &Endpoint) -> Option<Metadata> {
    use super::security::outbound::{
        TLS_MODE_ISTIO, TLS_MODE_KEY, TLS_MODE_LABEL, TRANSPORT_SOCKET_MATCH,
    };
    let mode = ep.labels.get(TLS_MODE_LABEL)?;
    if mode != TLS_MODE_ISTIO {
        return None;
    }
    let string = |s: &str| Value {
        kind: Some(ValueKind::StringValue(s.to_string())),
    };
    Some(Metadata {
        filter_metadata: [(
            TRANSPORT_SOCKET_MATCH.to_string(),
            Struct {
                fields: [(TLS_MODE_KEY.to_string(), string(TLS_MODE_ISTIO))].into(),
            },
        )]
        .into(),
        ..Default::default()
    })
}

/// `region/zone/subzone`, any suffix of which may be missing.
pub fn parse_locality(s: &str) -> Locality {
    let mut parts = s.splitn(3, '/');
    let mut next = || parts.next().unwrap_or("").to_string();
    Locality {
        region: next(),
        zone: next(),
        sub_zone: next(),
    }
}

#[cfg(test)]
mod tests;
