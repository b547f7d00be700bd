//! Gateways and the VirtualServices bound to them: a bound Gateway must exist (IST0101)
//! and serve one of the VirtualService's hosts (IST0132); a Gateway's selector must match
//! a Pod when Pods are given (IST0101), and a server's `credentialName` must name a TLS
//! Secret (IST0101); two Gateways selecting the same workload (by the same selector, or
//! different ones matching one Pod) must not both serve one host on one port (IST0145).

use super::Message;
use super::codes::{
    CONFLICTING_GATEWAYS, REFERENCED_RESOURCE_NOT_FOUND, VIRTUAL_SERVICE_HOST_NOT_FOUND_IN_GATEWAY,
};
use super::inventory::{Inventory, labels_include, selector_string};
use crate::config::istio::{Gateway, GatewayServer};
use crate::config::parse::Parsed;
use crate::model::hosts_intersect;
use std::collections::{BTreeMap, BTreeSet};

/// The name VirtualServices bind the sidecars by.
pub(super) const MESH: &str = "mesh";

pub(super) fn analyze(inventory: &Inventory, out: &mut Vec<Message>) {
    bound_virtual_services(inventory, out);
    selectors(inventory, out);
    credentials(inventory, out);
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

/// Each server's `credentialName` must name a Secret (holding TLS material: Shoal reads
/// no other) in the namespace of the gateway's workload: that of the Pods it selects
/// when Pods are given, else the Gateway's own. `namespace/name` names another.
fn credentials(inventory: &Inventory, out: &mut Vec<Message>) {
    for (parsed, gw) in inventory.gateways() {
        let namespace = inventory
            .pods_matching(None, &gw.selector)
            .next()
            .map_or(parsed.config.meta.namespace.as_str(), |p| {
                p.config.meta.namespace.as_str()
            });
        for (i, server) in gw.servers.iter().enumerate() {
            let Some(name) = server
                .tls
                .as_ref()
                .map(|t| t.credential_name.as_str())
                .filter(|n| !n.is_empty())
            else {
                continue;
            };
            let (ns, secret) = name.split_once('/').unwrap_or((namespace, name));
            let found = inventory
                .secrets()
                .any(|(p, _)| p.config.meta.namespace == ns && p.config.meta.name == secret);
            if !found {
                out.push(Message::about(
                    REFERENCED_RESOURCE_NOT_FOUND,
                    parsed,
                    format!(
                        "Referenced credentialName not found: {name:?} (servers[{i}].tls.credentialName: no TLS Secret {ns}/{secret})"
                    ),
                ));
            }
        }
    }
}

/// Whether two selectors pick the same gateway workload: equal, or both matching one
/// of the given Pods (Istio's analyzer compares the workloads, not the selectors).
fn same_workload(
    inventory: &Inventory,
    a: &BTreeMap<String, String>,
    b: &BTreeMap<String, String>,
) -> bool {
    a == b
        || inventory
            .pods_matching(None, a)
            .any(|p| labels_include(&p.config.meta.labels, b))
}

/// Gateways selecting one workload serving one host (with the same bind) on one port:
/// Istio's `CheckDuplicates`, across Gateways.
fn conflicts(inventory: &Inventory, out: &mut Vec<Message>) {
    let gateways: Vec<(&Parsed, &Gateway)> = inventory.gateways().collect();
    for (i, (parsed, gw)) in gateways.iter().enumerate() {
        let ports: BTreeSet<u32> = gw.servers.iter().map(port_of).collect();
        for port in ports {
            let mut others = BTreeSet::new();
            let mut shared = BTreeSet::new();
            for (j, (other_parsed, other)) in gateways.iter().enumerate() {
                if i == j || !same_workload(inventory, &gw.selector, &other.selector) {
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
    fn gateways_selecting_one_workload_by_different_selectors_conflict() {
        let narrower = "---\napiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: narrower, namespace: edge}\nspec:\n  selector: {istio: ingressgateway, app: gw}\n  servers:\n  - port: {number: 8080, name: http, protocol: HTTP}\n    hosts: ['*.example.com']\n";
        // Without Pods nothing says the two selectors pick one workload.
        let without_pods = format!("{GATEWAYS}{narrower}");
        assert!(
            !findings_with(CONFLICTING_GATEWAYS, &without_pods)
                .iter()
                .any(|f| f.contains("narrower"))
        );
        let pod = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: gw, namespace: edge, labels: {istio: ingressgateway, app: gw}}\nstatus: {podIP: 10.0.0.9}\n";
        let got = findings_with(CONFLICTING_GATEWAYS, &format!("{without_pods}{pod}"));
        assert!(
            got.contains(&"IST0145 Error Gateway edge/narrower: Conflict with gateways edge/copy (workload selector app=gw,istio=ingressgateway, port 8080, hosts *.example.com).".to_string()),
            "{got:#?}"
        );
        assert!(
            got.iter().any(|f| f.starts_with(
                "IST0145 Error Gateway edge/copy: Conflict with gateways edge/narrower "
            )),
            "{got:#?}"
        );
    }

    #[test]
    fn a_credential_name_must_name_a_secret() {
        let gateway = "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: tls, namespace: edge}\nspec:\n  selector: {istio: ingressgateway}\n  servers:\n  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['*.example.com']\n    tls: {mode: SIMPLE, credentialName: shop-cert}\n  - port: {number: 8443, name: https-2, protocol: HTTPS}\n    hosts: ['*.example.com']\n    tls: {mode: SIMPLE, credentialName: other/other-cert}\n";
        let secret = |ns: &str, name: &str| {
            format!(
                "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {ns}}}\ntype: kubernetes.io/tls\nstringData: {{tls.crt: '-----BEGIN CERTIFICATE-----', tls.key: '-----BEGIN PRIVATE KEY-----'}}\n"
            )
        };
        assert_eq!(
            findings_with(REFERENCED_RESOURCE_NOT_FOUND, gateway),
            [
                "IST0101 Error Gateway edge/tls: Referenced credentialName not found: \"other/other-cert\" (servers[1].tls.credentialName: no TLS Secret other/other-cert)",
                "IST0101 Error Gateway edge/tls: Referenced credentialName not found: \"shop-cert\" (servers[0].tls.credentialName: no TLS Secret edge/shop-cert)",
            ]
        );
        let both = format!(
            "{gateway}{}{}",
            secret("edge", "shop-cert"),
            secret("other", "other-cert")
        );
        assert_eq!(
            findings_with(REFERENCED_RESOURCE_NOT_FOUND, &both),
            Vec::<String>::new()
        );
        // The workload's namespace, when Pods say where it runs.
        let pod = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: gw, namespace: istio-system, labels: {istio: ingressgateway}}\nstatus: {podIP: 10.0.0.9}\n";
        let moved = format!("{both}{pod}");
        assert_eq!(
            findings_with(REFERENCED_RESOURCE_NOT_FOUND, &moved),
            [
                "IST0101 Error Gateway edge/tls: Referenced credentialName not found: \"shop-cert\" (servers[0].tls.credentialName: no TLS Secret istio-system/shop-cert)"
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
