//! Several VirtualServices bound to the sidecars (`mesh`) for one host, seen from a
//! common namespace, or for overlapping wildcard hosts where one is exported everywhere
//! (IST0109): which one a sidecar follows is undefined.

use super::Message;
use super::codes::CONFLICTING_MESH_GATEWAY_VIRTUAL_SERVICE_HOSTS;
use super::gateways::MESH;
use super::inventory::Inventory;
use crate::config::istio::VirtualService;
use crate::config::parse::Parsed;
use crate::model::{hosts_intersect, resolve_short_name};
use std::collections::BTreeSet;

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

/// Whether two mesh VirtualServices' hosts conflict, as Istio's analyzer decides: the same
/// host in scopes that meet, or, between one exported everywhere and one exported to some
/// namespaces, hosts that overlap (`*.productpage.d` and `*.d`).
fn conflict((a, a_scope): (&str, &Scope), (b, b_scope): (&str, &Scope)) -> bool {
    if a == b {
        return overlap(a_scope, b_scope);
    }
    a_scope.is_none() != b_scope.is_none() && hosts_intersect(a, b)
}

pub(super) fn analyze(inventory: &Inventory, out: &mut Vec<Message>) {
    // (VirtualService, host, scope) for every host of every mesh-bound VirtualService.
    let mut entries: Vec<(&Parsed, String, Scope)> = Vec::new();
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
            entries.push((parsed, host, exported_to(namespace, vs)));
        }
    }
    let mut reported = BTreeSet::new();
    for (parsed, host, scope) in &entries {
        let key = parsed.config.key();
        if reported.contains(&key) {
            continue;
        }
        let others: Vec<&Parsed> = entries
            .iter()
            .filter(|(p, h, s)| p.config.key() != key && conflict((host, scope), (h, s)))
            .map(|(p, _, _)| *p)
            .collect();
        if others.is_empty() {
            continue;
        }
        let names: BTreeSet<String> = others
            .iter()
            .chain([parsed])
            .map(|p| format!("{}/{}", p.config.meta.namespace, p.config.meta.name))
            .collect();
        let names = names.into_iter().collect::<Vec<_>>().join(",");
        reported.insert(key);
        out.push(Message::about(
            CONFLICTING_MESH_GATEWAY_VIRTUAL_SERVICE_HOSTS,
            parsed,
            format!(
                "The VirtualServices {names} associated with mesh gateway define the same host {host} which can lead to undefined behavior. This can be fixed by merging the conflicting VirtualServices into a single resource."
            ),
        ));
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

    /// Istio's own case (`virtualservice_conflictingmeshgatewayhosts_with_exportto`):
    /// a wildcard exported to one namespace against a wider one exported everywhere.
    #[test]
    fn overlapping_wildcard_hosts_conflict_as_in_istio() {
        let yaml = [
            vs(
                "productpage-d",
                "foo",
                "'*.productpage.d'",
                "  exportTo: [.]\n",
            ),
            vs("productpage-d", "bar", "'*.d'", "  exportTo: ['*']\n"),
            // Both exported to one namespace each: no common viewer.
            vs("e", "foo", "'*.productpage.e'", "  exportTo: [.]\n"),
            vs("e", "bar", "'*.e'", "  exportTo: [.]\n"),
        ]
        .concat();
        let got = findings_with(CODE, &yaml);
        assert_eq!(got.len(), 2, "{got:#?}");
        assert!(
            got[0].starts_with("IST0109 Error VirtualService foo/productpage-d: The VirtualServices bar/productpage-d,foo/productpage-d associated with mesh gateway define the same host *.productpage.d "),
            "{got:#?}"
        );
        assert!(
            got[1].starts_with("IST0109 Error VirtualService bar/productpage-d: The VirtualServices bar/productpage-d,foo/productpage-d associated with mesh gateway define the same host *.d "),
            "{got:#?}"
        );
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
