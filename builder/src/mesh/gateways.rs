//! Network gateways: Services labelled `topology.istio.io/network` (Istio's east-west
//! gateways), through which workloads on other networks reach this network's endpoints.

use super::NamespaceObjects;
use shoal_proto::config::{Kind, Spec};
use shoal_proto::model::NetworkGateway;

/// The label naming the network a gateway Service serves.
pub const NETWORK_LABEL: &str = "topology.istio.io/network";
/// Overrides the gateway's port (Istio's `networking.istio.io/gatewayPort`).
pub const GATEWAY_PORT_LABEL: &str = "networking.istio.io/gatewayPort";
/// The port Istio's east-west gateway serves mTLS passthrough on.
pub const DEFAULT_GATEWAY_PORT: u32 = 15443;

/// Every network gateway the namespace's Services declare: one per load balancer
/// address (else external IP), at the labelled port, else 15443. A gateway Service
/// without an address is not reachable from outside its network yet, so it is left out
/// until its load balancer has one.
pub fn build(objects: &NamespaceObjects<'_>) -> Vec<NetworkGateway> {
    let mut out = Vec::new();
    for config in objects.of(Kind::Service) {
        let Spec::Service(spec) = &config.spec else {
            continue;
        };
        let Some(network) = config.meta.labels.get(NETWORK_LABEL) else {
            continue;
        };
        let port = config
            .meta
            .labels
            .get(GATEWAY_PORT_LABEL)
            .and_then(|p| p.parse().ok())
            .unwrap_or(DEFAULT_GATEWAY_PORT);
        let addresses = if spec.load_balancer_ingress.is_empty() {
            &spec.external_ips
        } else {
            &spec.load_balancer_ingress
        };
        if addresses.is_empty() {
            tracing::debug!(service = %config.key(), "network gateway without an address yet");
        }
        out.extend(addresses.iter().map(|address| NetworkGateway {
            network: network.clone(),
            address: address.clone(),
            port,
            cluster: config.meta.origin.cluster.clone(),
        }));
    }
    out.sort();
    out.dedup();
    out
}
