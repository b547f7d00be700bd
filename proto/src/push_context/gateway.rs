//! What configures a router: the Gateways whose selector matches its labels, their
//! servers merged by port, and the VirtualServices bound to each server (Istio's
//! `MergedGateway` and `VirtualServicesForGateway`).
//!
//! ```text
//!  Gateway istio-system/public  selector istio=ingressgateway
//!    servers: 80 HTTP *.example.com      ─┐ port 80: one HTTP route config "http.80"
//!             443 HTTPS a.example.com     ─┤ port 443: one TLS filter chain per server,
//!  Gateway shop/shop-gw (same selector)   │   each with its route config
//!    servers: 80 HTTP shop/shop.example.com┘  "https.443.<port name>.<gateway>.<ns>"
//! ```
//! A server's port is a port of the Service in front of the router: the router listens
//! on the port that Service sends it to (its `targetPort`), as Istio translates it
//! (`resolvePorts`); with no such Service the server's port is bound as written.
//! The route configuration of an HTTP port is named by the port listened on
//! (`http.8080` for a server on 80 behind `80 → 8080`), as istiod names it.
//!
//! A server's hosts are `[namespace/]host`: a VirtualService binds to it when it names
//! the Gateway in `gateways`, one of its hosts intersects a server host, and its
//! namespace is the one the server host allows (`*` any, `.` the Gateway's own).

use super::ConfigIndex;
use super::scope::istio_order;
use crate::config::istio::{Gateway, GatewayServer, VirtualService};
use crate::model::{NamedConfig, export_visible, host_matches};
use std::collections::BTreeMap;
use std::sync::Arc;

/// How a gateway port carries traffic: decided by its first server, as Istio does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortKind {
    /// Plain HTTP (`HTTP`, `HTTP2`, `GRPC`, `GRPC-WEB`): one route configuration.
    Http,
    /// TLS terminated (`HTTPS`) then HTTP: a filter chain and route configuration per
    /// server.
    Https,
    /// TLS terminated (`TLS` with SIMPLE or MUTUAL) then TCP.
    TlsTerminated,
    /// TLS passed through by SNI (`TLS` or `HTTPS` with PASSTHROUGH) where a
    /// VirtualService's TLS route says.
    TlsPassthrough,
    /// TLS passed through by SNI (`TLS` or `HTTPS` with AUTO_PASSTHROUGH) to any mesh
    /// service the servers' hosts match, named by the SNI itself
    /// (`outbound_.<port>_.<subset>_.<host>`, as a sidecar's mTLS sends it): an east-west
    /// gateway's port, no VirtualService involved.
    AutoPassthrough,
    /// Plain TCP (`TCP`, `MONGO`).
    Tcp,
}

impl PortKind {
    pub fn of(server: &GatewayServer) -> PortKind {
        let protocol = server
            .port
            .as_ref()
            .map(|p| p.protocol.to_ascii_uppercase())
            .unwrap_or_default();
        let mode = server.tls.as_ref().map(|t| t.mode.as_str()).unwrap_or("");
        if mode == "AUTO_PASSTHROUGH" && matches!(protocol.as_str(), "HTTPS" | "TLS") {
            return PortKind::AutoPassthrough;
        }
        let passthrough = matches!(mode, "" | "PASSTHROUGH");
        match protocol.as_str() {
            "HTTPS" if passthrough => PortKind::TlsPassthrough,
            "HTTPS" => PortKind::Https,
            "TLS" if passthrough => PortKind::TlsPassthrough,
            "TLS" => PortKind::TlsTerminated,
            "TCP" | "MONGO" => PortKind::Tcp,
            _ => PortKind::Http,
        }
    }
}

/// One server of one Gateway.
#[derive(Clone, Debug)]
pub struct BoundServer {
    pub gateway: Arc<NamedConfig<Gateway>>,
    /// Its position in the Gateway's `servers`.
    pub index: usize,
}

impl BoundServer {
    pub fn server(&self) -> &GatewayServer {
        &self.gateway.spec.servers[self.index]
    }

    /// `namespace/name` of its Gateway.
    pub fn gateway_key(&self) -> String {
        format!("{}/{}", self.gateway.namespace, self.gateway.name)
    }

    /// The route configuration name of an HTTPS server, as Istio names it:
    /// `https.<port>.<port name>.<gateway>.<namespace>`.
    pub fn https_route_name(&self) -> String {
        let port = self.server().port.as_ref();
        format!(
            "https.{}.{}.{}.{}",
            port.map_or(0, |p| p.number),
            port.map_or("", |p| p.name.as_str()),
            self.gateway.name,
            self.gateway.namespace
        )
    }

    /// The server's hosts as (namespace filter, host): `*` when no namespace is given.
    fn hosts(&self) -> impl Iterator<Item = (&str, &str)> {
        self.server().hosts.iter().map(|h| match h.split_once('/') {
            Some((ns, host)) => (ns, host),
            None => ("*", h.as_str()),
        })
    }

    /// The hosts of `vs` this server serves (each the narrower of the two when they
    /// intersect), or none when the server does not admit `vs`'s namespace.
    pub fn hosts_for(&self, vs: &NamedConfig<VirtualService>) -> Vec<String> {
        let mut out = Vec::new();
        for vs_host in &vs.spec.hosts {
            for (ns, host) in self.hosts() {
                let ns_ok = match ns {
                    "*" => true,
                    "." => vs.namespace == self.gateway.namespace,
                    ns => vs.namespace == ns,
                };
                if !ns_ok {
                    continue;
                }
                let narrower = if host_matches(host, vs_host) {
                    vs_host.as_str()
                } else if host_matches(vs_host, host) {
                    host
                } else {
                    continue;
                };
                if !out.iter().any(|h| h == narrower) {
                    out.push(narrower.to_string());
                }
            }
        }
        out
    }

    /// The server's hosts without namespaces (Istio's SNI hosts, which AUTO_PASSTHROUGH
    /// matches services by).
    pub fn bare_hosts(&self) -> impl Iterator<Item = &str> {
        self.hosts().map(|(_, h)| h)
    }

    /// The server's hosts without namespaces, for SNI matching: none when any is `*`.
    pub fn sni_hosts(&self) -> Vec<String> {
        let hosts: Vec<&str> = self.hosts().map(|(_, h)| h).collect();
        if hosts.contains(&"*") {
            return Vec::new();
        }
        hosts.into_iter().map(str::to_string).collect()
    }
}

/// The servers of one port of a router.
#[derive(Clone, Debug)]
pub struct GatewayPort {
    /// The port the router listens on.
    pub number: u32,
    pub kind: PortKind,
    pub servers: Vec<BoundServer>,
}

/// A router's Gateways, merged by port.
#[derive(Clone, Debug, Default)]
pub struct MergedGateway {
    /// Sorted by port number.
    pub ports: Vec<GatewayPort>,
    /// Servers left out, and why (a port already taken by another protocol).
    pub warnings: Vec<String>,
}

impl MergedGateway {
    /// The Gateways selecting a router with `labels`, from every namespace, merged;
    /// `translation` is the router's `(service port, workload port)` pairs
    /// ([`super::ServiceInstances::gateway_ports`]).
    pub fn for_router(
        index: &ConfigIndex,
        labels: &BTreeMap<String, String>,
        translation: &[(u32, u32)],
    ) -> MergedGateway {
        let mut ports: BTreeMap<u32, GatewayPort> = BTreeMap::new();
        let mut warnings = Vec::new();
        let selected = index.gateways.iter().filter(|gw| {
            gw.spec
                .selector
                .iter()
                .all(|(k, v)| labels.get(k) == Some(v))
        });
        for gw in selected {
            for (i, server) in gw.spec.servers.iter().enumerate() {
                let Some(port) = &server.port else { continue };
                // Istio ignores the server's deprecated `targetPort` here.
                let number = translation
                    .iter()
                    .find(|(service_port, _)| *service_port == port.number)
                    .map_or(port.number, |(_, target)| *target);
                let kind = PortKind::of(server);
                let bound = BoundServer {
                    gateway: gw.clone(),
                    index: i,
                };
                let entry = ports.entry(number).or_insert_with(|| GatewayPort {
                    number,
                    kind,
                    servers: Vec::new(),
                });
                if entry.kind != kind {
                    warnings.push(format!(
                        "Gateway {}/{}: server {i} on port {number} ({kind:?}) conflicts with \
                         {:?} servers on that port: left out",
                        gw.namespace, gw.name, entry.kind
                    ));
                    continue;
                }
                entry.servers.push(bound);
            }
        }
        MergedGateway {
            ports: ports.into_values().collect(),
            warnings,
        }
    }
}

/// Whether `vs` names the Gateway `namespace/name` in its `gateways`.
pub fn binds_to(vs: &NamedConfig<VirtualService>, namespace: &str, name: &str) -> bool {
    names_gateway(&vs.spec.gateways, &vs.namespace, namespace, name)
}

/// Whether `gateways`, written in a VirtualService of `vs_namespace`, name the Gateway
/// `namespace/name` (a bare name is in the VirtualService's own namespace).
pub fn names_gateway(gateways: &[String], vs_namespace: &str, namespace: &str, name: &str) -> bool {
    gateways.iter().any(|g| match g.split_once('/') {
        Some((ns, n)) => ns == namespace && n == name,
        None => vs_namespace == namespace && g == name,
    })
}

/// The VirtualServices bound to `server`'s Gateway and visible from the router's
/// namespace, each with the hosts the server serves for it, in Istio's order
/// ([`istio_order`]: the oldest first).
pub fn virtual_services_for<'a>(
    index: &'a ConfigIndex,
    server: &BoundServer,
    router_namespace: &str,
) -> Vec<(&'a Arc<NamedConfig<VirtualService>>, Vec<String>)> {
    let mut bound: Vec<_> = index
        .gateway_virtual_services
        .iter()
        .filter(|vs| binds_to(vs, &server.gateway.namespace, &server.gateway.name))
        .filter(|vs| export_visible(&vs.spec.export_to, &vs.namespace, router_namespace))
        .filter_map(|vs| {
            let hosts = server.hosts_for(vs);
            (!hosts.is_empty()).then_some((vs, hosts))
        })
        .collect();
    bound.sort_by(|(a, _), (b, _)| {
        istio_order(a, router_namespace).cmp(&istio_order(b, router_namespace))
    });
    bound
}

#[cfg(test)]
mod tests;
