//! Gateways and the VirtualServices bound to them: a bound Gateway must exist (IST0101)
//! and serve one of the VirtualService's hosts (IST0132); a Gateway's selector must match
//! a Pod when Pods are given (IST0101); two Gateways selecting the same workloads must not
//! both serve one host on one port (IST0145).

use super::Message;
use super::codes::{
    CONFLICTING_GATEWAYS, REFERENCED_RESOURCE_NOT_FOUND, VIRTUAL_SERVICE_HOST_NOT_FOUND_IN_GATEWAY,
};
use super::inventory::{Inventory, selector_string};
use crate::config::istio::{Gateway, GatewayServer};
use crate::config::parse::Parsed;
use crate::model::hosts_intersect;
use std::collections::BTreeSet;

/// The name VirtualServices bind the sidecars by.
pub(super) const MESH: &str = "mesh";

pub(super) fn analyze(inventory: &Inventory, out: &mut Vec<Message>) {
    bound_virtual_services(inventory, out);
    selectors(inventory, out);
    conflicts(inventory, out);
}

/// `namespace/name`, `name` (in `namespace`), or Istio's deprecated
/// `name.namespace.svc.cluster.local` → (namespace, name).
fn gateway_name<'a>(reference: &'a str, namespace: &'a str) -> (&'a str, &'a str) {
    if let Some((ns, name)) = reference.split_once('/') {
        return (ns, name);
    }
    match reference.split('.').collect::<Vec<_>>()[..] {
        [name, ns, ..] => (ns, name),
        _ => (namespace, reference),
    }
}

fn bound_virtual_services(inventory: &Inventory, out: &mut Vec<Message>) {
    for (parsed, vs) in inventory.virtual_services() {
        let vs_ns = parsed.config.meta.namespace.as_str();
        for reference in vs.gateways.iter().filter(|g| *g != MESH) {
            let (ns, name) = gateway_name(reference, vs_ns);
            let gateway = inventory
                .gateways()
                .find(|(p, _)| p.config.meta.namespace == ns && p.config.meta.name == name);
            let Some((gw_parsed, gw)) = gateway else {
                out.push(Message::about(
                    REFERENCED_RESOURCE_NOT_FOUND,
                    parsed,
                    format!("Referenced gateway not found: {reference:?}"),
                ));
                continue;
            };
            // A delegate (no hosts) takes its root's hosts: nothing to check here.
            if vs.hosts.is_empty() {
                continue;
            }
            let gw_hosts = hosts_for(gw, &gw_parsed.config.meta.namespace, vs_ns);
            let served = vs
                .hosts
                .iter()
                .any(|h| gw_hosts.iter().any(|g| hosts_intersect(g, h)));
            if !served {
                out.push(Message::about(
                    VIRTUAL_SERVICE_HOST_NOT_FOUND_IN_GATEWAY,
                    parsed,
                    format!(
                        "one or more host [{}] defined in VirtualService {vs_ns}/{} not found in Gateway {ns}/{name}.",
                        vs.hosts.join(" "),
                        parsed.config.meta.name,
                    ),
                ));
            }
        }
    }
}

/// The hosts `gw` (in `gw_ns`) offers VirtualServices of `vs_ns`: its servers' hosts
/// without a namespace, and those whose `namespace/` is `*`, `vs_ns`, or `.` with the
/// Gateway in `vs_ns`.
fn hosts_for<'a>(gw: &'a Gateway, gw_ns: &str, vs_ns: &str) -> Vec<&'a str> {
    gw.servers
        .iter()
        .flat_map(|s| &s.hosts)
        .filter_map(|h| match h.split_once('/') {
            None => Some(h.as_str()),
            Some(("*", host)) => Some(host),
            Some((".", host)) if gw_ns == vs_ns => Some(host),
            Some((ns, host)) if ns == vs_ns => Some(host),
            Some(_) => None,
        })
        .collect()
}

fn selectors(inventory: &Inventory, out: &mut Vec<Message>) {
    if !inventory.has_pods() {
        return;
    }
    for (parsed, gw) in inventory.gateways() {
        if !gw.selector.is_empty() && inventory.pods_matching(None, &gw.selector).next().is_none() {
            out.push(Message::about(
                REFERENCED_RESOURCE_NOT_FOUND,
                parsed,
                format!(
                    "Referenced selector not found: {:?}",
                    selector_string(&gw.selector)
                ),
            ));
        }
    }
}

/// Gateways with the same selector serving one host (with the same bind) on one port:
/// Istio's `CheckDuplicates`, across Gateways.
fn conflicts(inventory: &Inventory, out: &mut Vec<Message>) {
    let gateways: Vec<(&Parsed, &Gateway)> = inventory.gateways().collect();
    for (i, (parsed, gw)) in gateways.iter().enumerate() {
        let ports: BTreeSet<u32> = gw.servers.iter().map(port_of).collect();
        for port in ports {
            let mut others = BTreeSet::new();
            let mut shared = BTreeSet::new();
            for (j, (other_parsed, other)) in gateways.iter().enumerate() {
                if i == j || other.selector != gw.selector {
                    continue;
                }
                for server in gw.servers.iter().filter(|s| port_of(s) == port) {
                    for theirs in other
                        .servers
                        .iter()
                        .filter(|s| port_of(s) == port && s.bind == server.bind)
                    {
                        for host in server.hosts.iter().filter(|h| theirs.hosts.contains(h)) {
                            let meta = &other_parsed.config.meta;
                            others.insert(format!("{}/{}", meta.namespace, meta.name));
                            shared.insert(host.as_str());
                        }
                    }
                }
            }
            if others.is_empty() {
                continue;
            }
            out.push(Message::about(
                CONFLICTING_GATEWAYS,
                parsed,
                format!(
                    "Conflict with gateways {} (workload selector {}, port {port}, hosts {}).",
                    others.into_iter().collect::<Vec<_>>().join(","),
                    selector_string(&gw.selector),
                    shared.into_iter().collect::<Vec<_>>().join(","),
                ),
            ));
        }
    }
}

fn port_of(server: &GatewayServer) -> u32 {
    server.port.as_ref().map_or(0, |p| p.number)
}

#[cfg(test)]
mod tests {
    use super::super::codes::{
        CONFLICTING_GATEWAYS, REFERENCED_RESOURCE_NOT_FOUND,
        VIRTUAL_SERVICE_HOST_NOT_FOUND_IN_GATEWAY,
    };
    use super::super::testing::findings_with;

    const GATEWAYS: &str = "apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: public, namespace: edge}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ['*.example.com', 'shop/shop.internal']
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: copy, namespace: edge}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ['*.example.com']
  - port: {number: 8080, name: http2, protocol: HTTP}
    hosts: ['*.example.com']
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: other-workload, namespace: edge}
spec:
  selector: {istio: eastwest}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ['*.example.com']
";

    fn vs(name: &str, hosts: &str, gateways: &str) -> String {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n  hosts: {hosts}\n  gateways: {gateways}\n  http:\n  - directResponse: {{status: 200}}\n"
        )
    }

    #[test]
    fn bound_gateways_must_exist_and_serve_a_host() {
        let yaml = [
            GATEWAYS.to_string(),
            vs("ok", "[www.example.com]", "[edge/public, mesh]"),
            vs("scoped", "[shop.internal]", "[edge/public]"),
            vs(
                "legacy",
                "[www.example.com]",
                "[public.edge.svc.cluster.local]",
            ),
            vs("missing", "[www.example.com]", "[public]"),
            vs("unserved", "[www.other.org]", "[edge/public]"),
        ]
        .concat();
        let not_found = findings_with(REFERENCED_RESOURCE_NOT_FOUND, &yaml);
        assert_eq!(
            not_found,
            ["IST0101 Error VirtualService shop/missing: Referenced gateway not found: \"public\""]
        );
        assert_eq!(
            findings_with(VIRTUAL_SERVICE_HOST_NOT_FOUND_IN_GATEWAY, &yaml),
            [
                "IST0132 Warning VirtualService shop/unserved: one or more host [www.other.org] defined in VirtualService shop/unserved not found in Gateway edge/public."
            ]
        );
    }

    #[test]
    fn gateway_selectors_must_match_a_pod_when_pods_are_given() {
        assert!(findings_with(REFERENCED_RESOURCE_NOT_FOUND, GATEWAYS).is_empty());
        let pod = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: gw, namespace: edge, labels: {istio: ingressgateway}}\nstatus: {podIP: 10.0.0.9}\n";
        assert_eq!(
            findings_with(REFERENCED_RESOURCE_NOT_FOUND, &format!("{GATEWAYS}{pod}")),
            [
                "IST0101 Error Gateway edge/other-workload: Referenced selector not found: \"istio=eastwest\""
            ]
        );
    }

    #[test]
    fn gateways_sharing_selector_port_and_host_conflict() {
        assert_eq!(
            findings_with(CONFLICTING_GATEWAYS, GATEWAYS),
            [
                "IST0145 Error Gateway edge/public: Conflict with gateways edge/copy (workload selector istio=ingressgateway, port 80, hosts *.example.com).",
                "IST0145 Error Gateway edge/copy: Conflict with gateways edge/public (workload selector istio=ingressgateway, port 80, hosts *.example.com).",
            ]
        );
    }
}
