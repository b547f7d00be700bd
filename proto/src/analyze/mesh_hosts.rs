//! Several VirtualServices bound to the sidecars (`mesh`) for one host, seen from a
//! common namespace (IST0109): which one a sidecar follows is undefined.

use super::Message;
use super::codes::CONFLICTING_MESH_GATEWAY_VIRTUAL_SERVICE_HOSTS;
use super::gateways::MESH;
use super::inventory::Inventory;
use crate::config::istio::VirtualService;
use crate::config::parse::Parsed;
use crate::model::resolve_short_name;
use std::collections::{BTreeMap, BTreeSet};

/// The namespaces a VirtualService is exported to; `None`: all.
type Scope = Option<BTreeSet<String>>;

fn exported_to(namespace: &str, vs: &VirtualService) -> Scope {
    if vs.export_to.is_empty() || vs.export_to.iter().any(|e| e == "*") {
        return None;
    }
    Some(
        vs.export_to
            .iter()
            .map(|e| if e == "." { namespace } else { e.as_str() })
            .map(str::to_string)
            .collect(),
    )
}

fn overlap(a: &Scope, b: &Scope) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => !a.is_disjoint(b),
        _ => true,
    }
}

pub(super) fn analyze(inventory: &Inventory, out: &mut Vec<Message>) {
    let mut by_host: BTreeMap<String, Vec<(&Parsed, Scope)>> = BTreeMap::new();
    for (parsed, vs) in inventory.virtual_services() {
        let bound_to_mesh = vs.gateways.is_empty() || vs.gateways.iter().any(|g| g == MESH);
        if !bound_to_mesh {
            continue;
        }
        let namespace = &parsed.config.meta.namespace;
        let hosts: BTreeSet<String> = vs
            .hosts
            .iter()
            .map(|h| resolve_short_name(h, namespace))
            .collect();
        for host in hosts {
            by_host
                .entry(host)
                .or_default()
                .push((parsed, exported_to(namespace, vs)));
        }
    }
    let mut reported = BTreeSet::new();
    for (host, list) in &by_host {
        let conflicting: Vec<&Parsed> = list
            .iter()
            .enumerate()
            .filter(|(i, (_, scope))| {
                list.iter()
                    .enumerate()
                    .any(|(j, (_, other))| *i != j && overlap(scope, other))
            })
            .map(|(_, (p, _))| *p)
            .collect();
        if conflicting.len() < 2 {
            continue;
        }
        let mut names: Vec<String> = conflicting
            .iter()
            .map(|p| format!("{}/{}", p.config.meta.namespace, p.config.meta.name))
            .collect();
        names.sort();
        let names = names.join(",");
        for parsed in conflicting {
            if reported.insert(parsed.config.key()) {
                out.push(Message::about(
                    CONFLICTING_MESH_GATEWAY_VIRTUAL_SERVICE_HOSTS,
                    parsed,
                    format!(
                        "The VirtualServices {names} associated with mesh gateway define the same host {host} which can lead to undefined behavior. This can be fixed by merging the conflicting VirtualServices into a single resource."
                    ),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::codes::CONFLICTING_MESH_GATEWAY_VIRTUAL_SERVICE_HOSTS as CODE;
    use super::super::testing::findings_with;

    fn vs(name: &str, namespace: &str, host: &str, extra: &str) -> String {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n  hosts: [{host}]\n{extra}  http:\n  - directResponse: {{status: 200}}\n"
        )
    }

    #[test]
    fn two_mesh_virtual_services_for_one_host_conflict() {
        let yaml = [
            vs("a", "shop", "reviews", ""),
            vs(
                "b",
                "shop",
                "reviews.shop.svc.cluster.local",
                "  gateways: [mesh, edge/gw]\n",
            ),
            // Bound to a gateway only: no conflict on the sidecars.
            vs("c", "shop", "reviews", "  gateways: [edge/gw]\n"),
        ]
        .concat();
        let got = findings_with(CODE, &yaml);
        assert_eq!(got.len(), 2, "{got:#?}");
        assert_eq!(
            got[0],
            "IST0109 Error VirtualService shop/a: The VirtualServices shop/a,shop/b associated with mesh gateway define the same host reviews.shop.svc.cluster.local which can lead to undefined behavior. This can be fixed by merging the conflicting VirtualServices into a single resource."
        );
        assert!(got[1].starts_with("IST0109 Error VirtualService shop/b: "));
    }

    #[test]
    fn virtual_services_exported_to_disjoint_namespaces_do_not_conflict() {
        let yaml = [
            vs("a", "one", "api.example.com", "  exportTo: [.]\n"),
            vs("b", "two", "api.example.com", "  exportTo: [.]\n"),
        ]
        .concat();
        assert!(findings_with(CODE, &yaml).is_empty());
        let yaml = [
            vs("a", "one", "api.example.com", "  exportTo: [.]\n"),
            vs("b", "two", "api.example.com", ""),
        ]
        .concat();
        assert_eq!(findings_with(CODE, &yaml).len(), 2);
    }
}
