//! Endpoints on other networks, reached through their network's gateway (Istio's
//! `EndpointsByNetworkFilter`): a proxy on network A cannot reach pod IPs on network B,
//! so B's endpoints become B's east-west gateways, weighted by how many healthy endpoints
//! each stands for, in each locality. A network without a gateway is unreachable: its
//! endpoints are left out.
//!
//! The gateway routes by the SNI of the mesh's mTLS (`AUTO_PASSTHROUGH`), so only
//! endpoints with a sidecar (`security.istio.io/tlsMode: istio`) count across networks,
//! and the gateway endpoint carries that label itself: the client's auto mTLS then picks
//! the mTLS transport for it, never plaintext (which the gateway could not route).

use crate::xds::security::outbound::{TLS_MODE_ISTIO, TLS_MODE_LABEL, has_mesh_identity};
use shoal_proto::model::Endpoint;
use shoal_proto::push_context::NetworkGateways;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Whether an endpoint on `endpoint` is reachable directly from a proxy on `proxy`:
/// the same network, or either one unset (a single-network mesh), as in Istio.
pub fn same_network(proxy: &str, endpoint: &str) -> bool {
    proxy.is_empty() || endpoint.is_empty() || proxy == endpoint
}

/// `endpoints` as a proxy on `network` reaches them.
pub fn reachable<'a>(
    endpoints: impl Iterator<Item = &'a Endpoint>,
    network: &str,
    gateways: &NetworkGateways,
) -> Vec<Cow<'a, Endpoint>> {
    let mut out = Vec::new();
    // (network, locality) → (total weight, one endpoint of the group, for its fields)
    let mut remote: BTreeMap<(&str, &str), (u32, &Endpoint)> = BTreeMap::new();
    for ep in endpoints {
        if same_network(network, &ep.network) {
            out.push(Cow::Borrowed(ep));
        } else if ep.healthy && has_mesh_identity(&ep.labels) {
            let group = remote
                .entry((ep.network.as_str(), ep.locality.as_str()))
                .or_insert((0, ep));
            group.0 = group.0.saturating_add(ep.weight.max(1));
        }
    }
    for ((remote_network, _), (weight, sample)) in remote {
        let Some(gateways) = gateways.get(remote_network).filter(|g| !g.is_empty()) else {
            tracing::debug!(
                network = remote_network,
                "no gateway: endpoints unreachable"
            );
            continue;
        };
        let count = u32::try_from(gateways.len()).unwrap_or(u32::MAX);
        for gateway in gateways {
            out.push(Cow::Owned(Endpoint {
                address: gateway.address.clone(),
                port: gateway.port,
                service_port: sample.service_port,
                labels: [(TLS_MODE_LABEL.to_string(), TLS_MODE_ISTIO.to_string())].into(),
                cluster: gateway.cluster.clone(),
                network: gateway.network.clone(),
                locality: sample.locality.clone(),
                weight: weight.div_ceil(count),
                healthy: true,
                service_account: sample.service_account.clone(),
            }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::model::NetworkGateway;

    fn ep(address: &str, network: &str, locality: &str, healthy: bool) -> Endpoint {
        Endpoint {
            address: address.into(),
            port: 8080,
            service_port: 9080,
            labels: [(TLS_MODE_LABEL.to_string(), TLS_MODE_ISTIO.to_string())].into(),
            cluster: format!("cluster-{network}"),
            network: network.into(),
            locality: locality.into(),
            weight: 1,
            healthy,
            service_account: String::new(),
        }
    }

    fn gateways(entries: &[(&str, &str)]) -> NetworkGateways {
        let mut out = NetworkGateways::new();
        for (network, address) in entries {
            out.entry(network.to_string())
                .or_default()
                .push(NetworkGateway {
                    network: network.to_string(),
                    address: address.to_string(),
                    port: 15443,
                    cluster: format!("cluster-{network}"),
                });
        }
        out
    }

    fn summary(eps: &[Cow<'_, Endpoint>]) -> Vec<(String, u32, u32, String)> {
        eps.iter()
            .map(|e| (e.address.clone(), e.port, e.weight, e.locality.clone()))
            .collect()
    }

    #[test]
    fn other_networks_go_through_their_gateways() {
        let eps = [
            ep("10.1.0.1", "net-1", "r/a", true),
            ep("10.2.0.1", "net-2", "r/b", true),
            ep("10.2.0.2", "net-2", "r/b", true),
            ep("10.2.0.3", "net-2", "r/b", false),
            ep("10.3.0.1", "net-3", "r/c", true),
        ];
        let gws = gateways(&[("net-2", "192.0.2.10")]);
        let out = reachable(eps.iter(), "net-1", &gws);
        // net-2's two healthy endpoints become its gateway, weight 2; net-3 has no
        // gateway and is left out.
        assert_eq!(
            summary(&out),
            [
                ("10.1.0.1".into(), 8080, 1, "r/a".into()),
                ("192.0.2.10".into(), 15443, 2, "r/b".into()),
            ]
        );
    }

    #[test]
    fn only_sidecars_are_reached_across_networks_and_through_mtls() {
        let mut plain = ep("10.2.0.9", "net-2", "r/b", true);
        plain.labels.clear();
        let eps = [ep("10.2.0.1", "net-2", "r/b", true), plain];
        let gws = gateways(&[("net-2", "192.0.2.10")]);
        let out = reachable(eps.iter(), "net-1", &gws);
        // The endpoint without a sidecar cannot be reached by SNI: not counted.
        assert_eq!(
            summary(&out),
            [("192.0.2.10".into(), 15443, 1, "r/b".into())]
        );
        assert!(
            has_mesh_identity(&out[0].labels),
            "the gateway endpoint selects the client's mTLS transport"
        );
        // A network of plaintext workloads only is unreachable, not reached in plaintext.
        let mut plain = ep("10.2.0.9", "net-2", "r/b", true);
        plain.labels.clear();
        assert!(reachable([plain].iter(), "net-1", &gws).is_empty());
    }

    #[test]
    fn a_proxy_without_a_network_reaches_every_endpoint() {
        let eps = [
            ep("10.1.0.1", "net-1", "", true),
            ep("10.2.0.1", "net-2", "", true),
        ];
        let out = reachable(eps.iter(), "", &gateways(&[("net-2", "192.0.2.10")]));
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|e| matches!(e, Cow::Borrowed(_))));
    }

    #[test]
    fn weight_is_split_between_a_networks_gateways() {
        let eps: Vec<_> = (0..3)
            .map(|i| ep(&format!("10.2.0.{i}"), "net-2", "", true))
            .collect();
        let gws = gateways(&[("net-2", "192.0.2.10"), ("net-2", "192.0.2.11")]);
        let weights: Vec<u32> = reachable(eps.iter(), "net-1", &gws)
            .iter()
            .map(|e| e.weight)
            .collect();
        assert_eq!(weights, [2, 2]);
    }
}
