//! A workload's service targets: the services and ports it serves, found as Istio finds
//! them for a Kubernetes pod, by the proxy's IP among the endpoints (Istio's
//! `GetProxyServiceTargets`).
//!
//! ```text
//!  endpoints of every service ──► address ──► [ServiceTarget (service, port, target port)]
//!                                        └──► [InboundPort] one per target port, sorted
//! ```
//! Built on first use per PushContext; a context derived from one whose targets were
//! built derives its own, looking again only at the addresses whose endpoints or
//! Services changed.

use super::ConfigIndex;
use super::shards::ShardedMap;
use crate::model::{Protocol, Service, ServiceEndpoints, ServiceKey, ServicePort};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// One service port a workload serves, and the workload port behind it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ServiceTarget {
    service: Arc<Service>,
    port: ServicePort,
    /// The workload's port (the endpoint's resolved target port).
    target_port: u32,
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

/// What the workload at one address serves.
#[derive(Clone, Debug)]
struct Workload {
    /// Sorted by (target port, hostname, namespace).
    targets: Arc<[ServiceTarget]>,
    ports: Arc<[InboundPort]>,
    gateway_ports: GatewayPorts,
}

impl Workload {
    fn new(mut targets: Vec<ServiceTarget>) -> Self {
        // Istio keeps the oldest service of a port; creation times are not in the
        // snapshot, so the order is by (hostname, namespace), stable across builds.
        targets.sort_by(|a, b| {
            (a.target_port, &a.service.hostname, &a.service.namespace).cmp(&(
                b.target_port,
                &b.service.hostname,
                &b.service.namespace,
            ))
        });
        Workload {
            ports: inbound_ports(&targets),
            gateway_ports: gateway_port_pairs(&targets),
            targets: targets.into(),
        }
    }
}

/// Service targets by workload address, sharded so that a context derived for an
/// endpoint change shares every shard whose addresses it did not move.
///
/// A target's `service` is the index's at the time the target was found: a later index
/// with the same Services may have filled other defaults (`exportTo`) into its own copy.
/// Only what a Service's own chunk sets is read here (its name, ports and labels).
#[derive(Debug, Default)]
pub struct ServiceInstances {
    by_address: ShardedMap<String, Workload>,
}

impl ServiceInstances {
    pub(super) fn build<'a>(
        index: &ConfigIndex,
        endpoints: impl Iterator<Item = &'a Arc<ServiceEndpoints>>,
    ) -> Self {
        let services: HashMap<ServiceKey, &Arc<Service>> =
            index.services.iter().map(|s| (s.key(), s)).collect();
        let mut by_address: HashMap<&str, Vec<ServiceTarget>> = HashMap::new();
        for chunk in endpoints {
            let Some(service) = services.get(&chunk.service) else {
                continue;
            };
            for (address, target) in targets_of(service, chunk) {
                push_new(by_address.entry(address).or_default(), target);
            }
        }
        let by_address = by_address
            .into_iter()
            .map(|(address, targets)| (address.to_owned(), Workload::new(targets)))
            .collect();
        ServiceInstances { by_address }
    }

    /// These targets after the services of the endpoint chunks `touched` (each changed
    /// service's chunks before and after the change) changed their endpoints or their
    /// Service; `now` gives a service's chunk after the change, `index` its Service. Only
    /// the addresses the touched chunks name are looked at again; only the shards whose
    /// targets moved are copied.
    pub(super) fn with_services_changed<'a>(
        &self,
        index: &ConfigIndex,
        touched: &[Arc<ServiceEndpoints>],
        now: impl Fn(&ServiceKey) -> Option<&'a Arc<ServiceEndpoints>>,
    ) -> Self {
        let changed: HashSet<(&str, &str)> = touched
            .iter()
            .map(|c| (c.service.hostname.as_str(), c.service.namespace.as_str()))
            .collect();
        // The changed services' targets now, by address.
        let mut fresh: HashMap<&str, Vec<ServiceTarget>> = HashMap::new();
        for chunk in touched {
            let key = &chunk.service;
            let current = now(key).filter(|c| Arc::ptr_eq(c, chunk));
            let Some(chunk) = current else {
                continue;
            };
            // The last of a key, as `build` takes it.
            let service = index
                .services_by_host
                .get(&key.hostname)
                .and_then(|s| s.iter().rfind(|s| s.namespace == key.namespace));
            let Some(service) = service else {
                continue;
            };
            for (address, target) in targets_of(service, chunk) {
                push_new(fresh.entry(address).or_default(), target);
            }
        }
        let addresses: HashSet<&str> = touched
            .iter()
            .flat_map(|c| &c.endpoints)
            .map(|ep| ep.address.as_str())
            .collect();
        let mut by_address = self.by_address.clone();
        for address in addresses {
            let before = self.by_address.get(address);
            let kept = before
                .into_iter()
                .flat_map(|w| w.targets.iter())
                .filter(|t| {
                    !changed.contains(&(t.service.hostname.as_str(), t.service.namespace.as_str()))
                });
            let mut targets: Vec<ServiceTarget> = kept.cloned().collect();
            targets.extend(fresh.remove(address).unwrap_or_default());
            if targets.is_empty() {
                by_address.remove(address);
                continue;
            }
            let workload = Workload::new(targets);
            if before.is_none_or(|b| b.targets != workload.targets) {
                by_address.insert(address.to_owned(), workload);
            }
        }
        ServiceInstances { by_address }
    }

    /// The service targets of the workload at `address`, by target port.
    #[cfg(test)]
    fn targets(&self, address: &str) -> &[ServiceTarget] {
        self.by_address.get(address).map_or(&[], |w| &w.targets)
    }

    /// How a router at `address` translates a Gateway server's port (a Service port of
    /// the Services selecting it) to the port it listens on (Istio's `resolvePorts` with
    /// a label selector: the first Service target of that port wins).
    pub fn gateway_ports(&self, address: &str) -> GatewayPorts {
        self.by_address
            .get(address)
            .map_or_else(|| Arc::from([]), |w| w.gateway_ports.clone())
    }

    /// The inbound ports of the workload at `address`, sorted by target port.
    pub fn inbound_ports(&self, address: &str) -> Arc<[InboundPort]> {
        self.by_address
            .get(address)
            .map_or_else(|| Arc::from([]), |w| w.ports.clone())
    }
}

/// `service`'s targets in its endpoint chunk, by address: one per proxied port of each
/// endpoint with an address.
fn targets_of<'a>(
    service: &'a Arc<Service>,
    chunk: &'a ServiceEndpoints,
) -> impl Iterator<Item = (&'a str, ServiceTarget)> {
    chunk.endpoints.iter().filter_map(move |ep| {
        let port = service.port(ep.service_port)?;
        // UDP is not proxied, inbound or outbound.
        if !port.protocol.is_proxied() || ep.address.is_empty() {
            return None;
        }
        let target = ServiceTarget {
            service: service.clone(),
            port: port.clone(),
            target_port: ep.port,
        };
        Some((ep.address.as_str(), target))
    })
}

fn push_new(targets: &mut Vec<ServiceTarget>, target: ServiceTarget) {
    if !targets.contains(&target) {
        targets.push(target);
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

    /// Every address's inbound and gateway ports, and targets, in `instances`.
    fn every_port(
        instances: &ServiceInstances,
        addresses: &[String],
    ) -> Vec<(Arc<[InboundPort]>, GatewayPorts, Vec<ServiceTarget>)> {
        addresses
            .iter()
            .map(|a| {
                (
                    instances.inbound_ports(a),
                    instances.gateway_ports(a),
                    instances.targets(a).to_vec(),
                )
            })
            .collect()
    }

    #[test]
    fn targets_derived_for_changed_endpoints_and_services_equal_targets_built_afresh() {
        // Services sharing workloads and ports, one not translated at gateways, one UDP.
        let mut services: Vec<Service> = (0..6)
            .map(|i| {
                let protocol = [Protocol::Http, Protocol::Tcp, Protocol::Udp][i % 3];
                svc(&format!("s{i}"), 80 + (i as u32 % 2), protocol)
            })
            .collect();
        services[4]
            .labels
            .insert(DISABLE_GATEWAY_PORT_TRANSLATION.into(), "true".into());
        // The namespace's Services: every one but those left out.
        let mut left_out = [false; 6];
        let namespace = |services: &[Service], left_out: &[bool]| {
            Chunk::Namespace(NamespaceConfig {
                namespace: "ns".into(),
                services: services
                    .iter()
                    .zip(left_out)
                    .filter(|(_, out)| !**out)
                    .map(|(s, _)| s.clone())
                    .collect(),
                ..Default::default()
            })
        };
        let addresses: Vec<String> = (0..8).map(|i| format!("10.0.0.{i}")).collect();
        let mut seed = 7_u64;
        let mut next_random = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        let mut push = PushContext::from_chunks(1, [namespace(&services, &left_out)]);
        push.service_instances();
        for version in 2..300 {
            let service = services[next_random(services.len())].clone();
            let change = if next_random(5) == 0 {
                (vec![], vec![ChunkKey::Endpoints(service.key())])
            } else {
                let endpoints = (0..next_random(4))
                    .map(|_| {
                        let target = 9000 + next_random(3) as u32;
                        Endpoint::at(&addresses[next_random(8)], target, service.ports[0].port)
                    })
                    .collect();
                let chunk = Chunk::Endpoints(ServiceEndpoints {
                    service: service.key(),
                    endpoints,
                });
                let mut upserts = Vec::new();
                if next_random(4) != 0 {
                    upserts.push(chunk);
                }
                // A routing change (the same Services, a new index), or a Service
                // changed, removed or added back.
                match next_random(6) {
                    0 => upserts.push(namespace(&services, &left_out)),
                    1 => {
                        let i = next_random(services.len());
                        let protocol = [Protocol::Http, Protocol::Tcp, Protocol::Udp];
                        services[i].ports[0].protocol = protocol[next_random(3)];
                        upserts.push(namespace(&services, &left_out));
                    }
                    2 => {
                        let i = next_random(services.len());
                        left_out[i] = !left_out[i];
                        upserts.push(namespace(&services, &left_out));
                    }
                    3 => {
                        let i = next_random(services.len());
                        let labels = &mut services[i].labels;
                        if labels.remove(DISABLE_GATEWAY_PORT_TRANSLATION).is_none() {
                            labels.insert(DISABLE_GATEWAY_PORT_TRANSLATION.into(), "true".into());
                        }
                        upserts.push(namespace(&services, &left_out));
                    }
                    _ => {}
                }
                (upserts, vec![])
            };
            let next = push.with_changes(version, change.0, change.1);
            let derived = next.instances.get().expect("derived from the built parent");
            let afresh = ServiceInstances::build(&next.index, next.endpoints.values());
            assert_eq!(
                every_port(derived, &addresses),
                every_port(&afresh, &addresses),
                "version {version}"
            );
            // What is not listed as moved kept its targets.
            let kept: Vec<String> = addresses
                .iter()
                .filter(|a| !next.targets_may_have_moved(a))
                .cloned()
                .collect();
            assert_eq!(
                every_port(derived, &kept),
                every_port(push.service_instances(), &kept),
                "version {version}"
            );
            push = next;
        }
    }

    #[test]
    fn targets_are_kept_through_routing_changes_and_derived_when_a_service_changes() {
        let web = svc("web", 80, Protocol::Http);
        let namespace = |services: Vec<Service>| {
            Chunk::Namespace(NamespaceConfig {
                namespace: "ns".into(),
                services,
                ..Default::default()
            })
        };
        let push = PushContext::from_chunks(
            1,
            [namespace(vec![web.clone()]), eps(&web, "10.0.0.1", 8080)],
        );
        // Nothing built yet: nothing derived.
        let unbuilt = push.with_changes(2, [eps(&web, "10.0.0.2", 8080)], []);
        assert!(unbuilt.instances.get().is_none());

        let built = push.service_instances().clone();
        let routed = push.with_changes(2, [namespace(vec![web.clone()])], []);
        assert!(Arc::ptr_eq(routed.instances.get().expect("kept"), &built));

        let mut tcp = web.clone();
        tcp.ports[0].protocol = Protocol::Tcp;
        let reshaped = push.with_changes(2, [namespace(vec![tcp])], []);
        let derived = reshaped.instances.get().expect("derived");
        assert_eq!(derived.inbound_ports("10.0.0.1")[0].protocol, Protocol::Tcp);
    }
}
