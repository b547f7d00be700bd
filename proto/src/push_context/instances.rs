//! A workload's service targets: the services and ports it serves, found as Istio finds
//! them for a Kubernetes pod, by the proxy's IP among the endpoints (Istio's
//! `GetProxyServiceTargets`).
//!
//! ```text
//!  endpoints of every service ──► address ──► [ServiceTarget (service, port, target port)]
//!                                        └──► [InboundPort] one per target port, sorted
//! ```
//! Built on first use per PushContext and kept until endpoints or services change.

use super::ConfigIndex;
use crate::model::{Protocol, Service, ServiceEndpoints, ServiceKey, ServicePort};
use std::collections::HashMap;
use std::sync::Arc;

/// One service port a workload serves, and the workload port behind it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceTarget {
    pub service: Arc<Service>,
    pub port: ServicePort,
    /// The workload's port (the endpoint's resolved target port).
    pub target_port: u32,
}

/// One inbound port of a workload: what its inbound filter chain and cluster are made of.
/// Proxies with equal inbound ports get equal inbound config, so this is a cache key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InboundPort {
    /// The workload's port: the chain's `destination_port`, the `inbound|<port>||` name.
    pub target_port: u32,
    /// The service port it backs (names the HTTP virtual host, as in Istio).
    pub service_port: u32,
    pub protocol: Protocol,
    /// The service the port was taken from (the first, when several share it).
    pub hostname: String,
}

/// The label by which a Service opts out of gateway port translation (Istio's
/// `DisableGatewayPortTranslationLabel`).
pub const DISABLE_GATEWAY_PORT_TRANSLATION: &str =
    "experimental.istio.io/disable-gateway-port-translation";

/// A router's gateway port translation: `(service port, workload port)` pairs, sorted by
/// service port, one per service port. A router with equal pairs gets equal listeners,
/// so this is part of its cache key.
pub type GatewayPorts = Arc<[(u32, u32)]>;

/// Service targets by workload address.
#[derive(Debug, Default)]
pub struct ServiceInstances {
    by_address: HashMap<String, Vec<ServiceTarget>>,
    ports: HashMap<String, Arc<[InboundPort]>>,
    gateway_ports: HashMap<String, GatewayPorts>,
}

impl ServiceInstances {
    pub(super) fn build<'a>(
        index: &ConfigIndex,
        endpoints: impl Iterator<Item = &'a Arc<ServiceEndpoints>>,
    ) -> Self {
        let services: HashMap<ServiceKey, &Arc<Service>> =
            index.services.iter().map(|s| (s.key(), s)).collect();
        let mut by_address: HashMap<String, Vec<ServiceTarget>> = HashMap::new();
        for chunk in endpoints {
            let Some(service) = services.get(&chunk.service) else {
                continue;
            };
            for ep in &chunk.endpoints {
                let Some(port) = service.port(ep.service_port) else {
                    continue;
                };
                // UDP is not proxied, inbound or outbound.
                if !port.protocol.is_proxied() || ep.address.is_empty() {
                    continue;
                }
                let target = ServiceTarget {
                    service: (*service).clone(),
                    port: port.clone(),
                    target_port: ep.port,
                };
                let targets = by_address.entry(ep.address.clone()).or_default();
                if !targets.contains(&target) {
                    targets.push(target);
                }
            }
        }
        let mut ports = HashMap::with_capacity(by_address.len());
        let mut gateway_ports = HashMap::with_capacity(by_address.len());
        for (address, targets) in &mut by_address {
            // Istio keeps the oldest service of a port; creation times are not in the
            // snapshot, so the order is by (hostname, namespace), stable across builds.
            targets.sort_by(|a, b| {
                (a.target_port, &a.service.hostname, &a.service.namespace).cmp(&(
                    b.target_port,
                    &b.service.hostname,
                    &b.service.namespace,
                ))
            });
            ports.insert(address.clone(), inbound_ports(targets));
            gateway_ports.insert(address.clone(), gateway_port_pairs(targets));
        }
        ServiceInstances {
            by_address,
            ports,
            gateway_ports,
        }
    }

    /// The service targets of the workload at `address`, by target port.
    pub fn targets(&self, address: &str) -> &[ServiceTarget] {
        self.by_address.get(address).map_or(&[], Vec::as_slice)
    }

    /// How a router at `address` translates a Gateway server's port (a Service port of
    /// the Services selecting it) to the port it listens on (Istio's `resolvePorts` with
    /// a label selector: the first Service target of that port wins).
    pub fn gateway_ports(&self, address: &str) -> GatewayPorts {
        self.gateway_ports
            .get(address)
            .cloned()
            .unwrap_or_else(|| Arc::from([]))
    }

    /// The inbound ports of the workload at `address`, sorted by target port.
    pub fn inbound_ports(&self, address: &str) -> Arc<[InboundPort]> {
        self.ports
            .get(address)
            .cloned()
            .unwrap_or_else(|| Arc::from([]))
    }
}

/// One `(service port, target port)` per service port, the first target of each
/// winning; Services labelled [`DISABLE_GATEWAY_PORT_TRANSLATION`] are skipped.
fn gateway_port_pairs(targets: &[ServiceTarget]) -> GatewayPorts {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for t in targets {
        if t.service
            .labels
            .contains_key(DISABLE_GATEWAY_PORT_TRANSLATION)
        {
            continue;
        }
        if !out.iter().any(|(port, _)| *port == t.port.port) {
            out.push((t.port.port, t.target_port));
        }
    }
    out.sort_unstable();
    out.into()
}

/// One port per target port, the first target of each winning (targets sorted by it).
fn inbound_ports(targets: &[ServiceTarget]) -> Arc<[InboundPort]> {
    let mut out: Vec<InboundPort> = Vec::new();
    for t in targets {
        match out.last() {
            Some(last) if last.target_port == t.target_port => {
                if last.protocol != t.port.protocol {
                    tracing::debug!(
                        port = t.target_port,
                        kept = last.hostname,
                        skipped = t.service.hostname,
                        "conflicting inbound protocols on one port: keeping the first service"
                    );
                }
            }
            _ => out.push(InboundPort {
                target_port: t.target_port,
                service_port: t.port.port,
                protocol: t.port.protocol,
                hostname: t.service.hostname.clone(),
            }),
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::super::PushContext;
    use super::*;
    use crate::model::{Endpoint, ExportTo, NamespaceConfig, Resolution};
    use crate::snapshot::{Chunk, ChunkKey};

    fn svc(name: &str, port: u32, protocol: Protocol) -> Service {
        Service {
            hostname: format!("{name}.ns.svc.cluster.local"),
            namespace: "ns".into(),
            name: name.into(),
            ports: vec![ServicePort {
                name: "p".into(),
                port,
                protocol,
            }],
            addresses: vec![],
            resolution: Resolution::ClientSideLb,
            mesh_external: false,
            export_to: ExportTo::default(),
            labels: Default::default(),
            clusters: vec![],
            external_name: String::new(),
        }
    }

    fn eps(service: &Service, ip: &str, target: u32) -> Chunk {
        Chunk::Endpoints(ServiceEndpoints {
            service: service.key(),
            endpoints: vec![Endpoint::at(ip, target, service.ports[0].port)],
        })
    }

    #[test]
    fn targets_by_workload_address() {
        let (web, alias, dns) = (
            svc("web", 80, Protocol::Http),
            svc("alias", 81, Protocol::Tcp),
            svc("dns", 53, Protocol::Udp),
        );
        let push = PushContext::from_chunks(
            1,
            [
                Chunk::Namespace(NamespaceConfig {
                    namespace: "ns".into(),
                    services: vec![web.clone(), alias.clone(), dns.clone()],
                    ..Default::default()
                }),
                eps(&web, "10.0.0.1", 8080),
                eps(&alias, "10.0.0.1", 8080),
                eps(&dns, "10.0.0.1", 53),
            ],
        );
        let instances = push.service_instances();
        // Both services, UDP left out; one inbound port per workload port, the first
        // service (by hostname) winning.
        assert_eq!(instances.targets("10.0.0.1").len(), 2);
        let ports = instances.inbound_ports("10.0.0.1");
        assert_eq!(
            &*ports,
            [InboundPort {
                target_port: 8080,
                service_port: 81,
                protocol: Protocol::Tcp,
                hostname: "alias.ns.svc.cluster.local".into(),
            }]
        );
        assert!(instances.inbound_ports("10.0.0.2").is_empty());

        // An endpoint change rebuilds the index; an unrelated clone keeps it.
        let moved = push.with_changes(
            2,
            [eps(&web, "10.0.0.2", 8080)],
            [ChunkKey::Endpoints(alias.key())],
        );
        assert_eq!(
            moved.service_instances().inbound_ports("10.0.0.2")[0].target_port,
            8080
        );
        assert!(
            moved
                .service_instances()
                .inbound_ports("10.0.0.1")
                .is_empty()
        );
        assert!(Arc::ptr_eq(
            push.service_instances(),
            push.clone().service_instances()
        ));
    }
}
