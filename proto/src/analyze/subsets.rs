//! DestinationRules: the host must be a service of the mesh (IST0174), and each subset
//! must select some workload of it (IST0173) — checked against the Pods the Service or
//! ServiceEntry selects when Pods are given, or a ServiceEntry's inline endpoints, with
//! the labels Istio adds from the Node (`topology.kubernetes.io/*`, `topology.istio.io/*`,
//! `kubernetes.io/hostname`).

use super::Message;
use super::codes::{DESTINATION_RULE_SUBSET_NOT_SELECT_PODS, UNKNOWN_DESTINATION_RULE_HOST};
use super::hosts::{Workloads, seen_from};
use super::inventory::Inventory;
use crate::model::resolve_short_name;
use std::collections::BTreeMap;

pub(super) fn analyze(inventory: &Inventory, out: &mut Vec<Message>) {
    for (parsed, dr) in inventory.destination_rules() {
        let namespace = &parsed.config.meta.namespace;
        let host = resolve_short_name(&dr.host, namespace);
        let unknown = || {
            Message::about(
                UNKNOWN_DESTINATION_RULE_HOST,
                parsed,
                format!(
                    "The host {} defined in the DestinationRule does not match any services in the mesh.",
                    dr.host
                ),
            )
        };
        if host.starts_with('*') {
            if !inventory.hosts.any_matching(&host) {
                out.push(unknown());
            }
            continue;
        }
        let from = seen_from(namespace, &dr.export_to);
        let Some(service) = inventory.hosts.find(&host, from.as_deref()) else {
            out.push(unknown());
            continue;
        };
        for subset in &dr.subsets {
            let selects = match &service.workloads {
                Workloads::Selector(selector) if inventory.has_pods() => {
                    let mut labels = (*selector).clone();
                    labels.extend(subset.labels.clone());
                    inventory
                        .pods()
                        .filter(|(p, _)| p.config.meta.namespace == service.namespace)
                        .any(|(p, pod)| {
                            let locality = locality_labels(&pod.node_locality, "");
                            let mut host = BTreeMap::new();
                            if !pod.node_name.is_empty() {
                                host.insert(HOSTNAME.to_string(), pod.node_name.clone());
                            }
                            selects(&p.config.meta.labels, &[&locality, &host], &labels)
                        })
                }
                Workloads::Endpoints(endpoints) => endpoints.iter().any(|e| {
                    let derived = locality_labels(&e.locality, &e.network);
                    selects(&e.labels, &[&derived], &subset.labels)
                }),
                _ => true,
            };
            if !selects {
                out.push(Message::about(
                    DESTINATION_RULE_SUBSET_NOT_SELECT_PODS,
                    parsed,
                    format!(
                        "The Subset {} defined in the DestinationRule does not select any pods. Which may lead to 503 UH (NoHealthyUpstream).",
                        subset.name
                    ),
                ));
            }
        }
    }
}

/// The labels Istio gives a workload from its Node (and network): a subset may select
/// by them though no Pod carries them.
const REGION: &str = "topology.kubernetes.io/region";
const ZONE: &str = "topology.kubernetes.io/zone";
const SUBZONE: &str = "topology.istio.io/subzone";
const HOSTNAME: &str = "kubernetes.io/hostname";
const NETWORK: &str = "topology.istio.io/network";
const CLUSTER: &str = "topology.istio.io/cluster";

/// Whether Istio takes `key` from the Node, the cluster or the network.
fn node_derived(key: &str) -> bool {
    [REGION, ZONE, SUBZONE, HOSTNAME, NETWORK, CLUSTER].contains(&key)
        || key.starts_with("topology.kubernetes.io/")
        || key.starts_with("topology.istio.io/")
}

/// `region/zone/subzone` and a network as the labels Istio adds for them.
fn locality_labels(locality: &str, network: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (key, value) in [REGION, ZONE, SUBZONE].into_iter().zip(locality.split('/')) {
        if !value.is_empty() {
            out.insert(key.to_string(), value.to_string());
        }
    }
    if !network.is_empty() {
        out.insert(NETWORK.to_string(), network.to_string());
    }
    out
}

/// Whether a workload with `labels` (and the `derived` ones Istio adds) is selected by
/// `selector`. A node-derived label no one here knows (the analysis sees no Nodes) is
/// taken to match, so that IST0173 is not reported where Istio would not report it.
fn selects(
    labels: &BTreeMap<String, String>,
    derived: &[&BTreeMap<String, String>],
    selector: &BTreeMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| {
        let known = labels
            .get(k)
            .or_else(|| derived.iter().find_map(|d| d.get(k)));
        match known {
            Some(value) => value == v,
            None => node_derived(k),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::codes::{
        DESTINATION_RULE_SUBSET_NOT_SELECT_PODS, UNKNOWN_DESTINATION_RULE_HOST,
    };
    use super::super::testing::findings_with;

    const MESH: &str = "apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec:
  selector: {app: reviews}
  ports: [{name: http, port: 9080}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vms, namespace: shop}
spec:
  hosts: [vms.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.1, labels: {version: v1}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: shop}
spec:
  host: reviews
  subsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: vms, namespace: shop}
spec:
  host: vms.example.com
  subsets: [{name: v1, labels: {version: v1}}, {name: v3, labels: {version: v3}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: all, namespace: shop}
spec:
  host: '*.shop.svc.cluster.local'
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ghost, namespace: shop}
spec:
  host: ghost
";

    #[test]
    fn unknown_hosts_are_reported() {
        assert_eq!(
            findings_with(UNKNOWN_DESTINATION_RULE_HOST, MESH),
            [
                "IST0174 Warning DestinationRule shop/ghost: The host ghost defined in the DestinationRule does not match any services in the mesh."
            ]
        );
    }

    #[test]
    fn subsets_may_select_by_the_labels_istio_takes_from_the_node() {
        let yaml = "apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec:
  selector: {app: reviews}
  ports: [{name: http, port: 9080}]
---
apiVersion: v1
kind: Pod
metadata: {name: r1, namespace: shop, labels: {app: reviews}}
spec: {nodeName: node-1}
status: {podIP: 10.0.0.1}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vms, namespace: shop}
spec:
  hosts: [vms.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.1, locality: eu/west-1, network: n1}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: shop}
spec:
  host: reviews
  subsets:
  - {name: west, labels: {topology.kubernetes.io/zone: west-1}}
  - {name: n1, labels: {topology.istio.io/network: n1, topology.istio.io/subzone: a}}
  - {name: node, labels: {kubernetes.io/hostname: node-1}}
  - {name: other-node, labels: {kubernetes.io/hostname: node-2}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: vms, namespace: shop}
spec:
  host: vms.example.com
  subsets:
  - {name: west, labels: {topology.kubernetes.io/zone: west-1}}
  - {name: east, labels: {topology.kubernetes.io/zone: east-1}}
  - {name: n1, labels: {topology.istio.io/network: n1}}
";
        let subset = |dr: &str, name: &str| {
            format!(
                "IST0173 Error DestinationRule shop/{dr}: The Subset {name} defined in the DestinationRule does not select any pods. Which may lead to 503 UH (NoHealthyUpstream)."
            )
        };
        assert_eq!(
            findings_with(DESTINATION_RULE_SUBSET_NOT_SELECT_PODS, yaml),
            [subset("reviews", "other-node"), subset("vms", "east")]
        );
    }

    #[test]
    fn subsets_must_select_pods_when_pods_are_given_and_endpoints_always() {
        let subset = |dr: &str, name: &str| {
            format!(
                "IST0173 Error DestinationRule shop/{dr}: The Subset {name} defined in the DestinationRule does not select any pods. Which may lead to 503 UH (NoHealthyUpstream)."
            )
        };
        assert_eq!(
            findings_with(DESTINATION_RULE_SUBSET_NOT_SELECT_PODS, MESH),
            [subset("vms", "v3")]
        );
        // A v1 Pod of reviews, and a v2 Pod in another namespace (not the Service's).
        let pods = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: r1, namespace: shop, labels: {app: reviews, version: v1}}\nstatus: {podIP: 10.0.0.1}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: r2, namespace: other, labels: {app: reviews, version: v2}}\nstatus: {podIP: 10.0.0.2}\n";
        assert_eq!(
            findings_with(
                DESTINATION_RULE_SUBSET_NOT_SELECT_PODS,
                &format!("{MESH}{pods}")
            ),
            [subset("reviews", "v2"), subset("vms", "v3")]
        );
    }
}
