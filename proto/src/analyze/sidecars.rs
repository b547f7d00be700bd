//! Sidecars: at most one without a workload selector per namespace (IST0111); when Pods
//! are given, a selector must match one (IST0101) and no Pod may be selected by two
//! (IST0110).

use super::Message;
use super::codes::{
    CONFLICTING_SIDECAR_WORKLOAD_SELECTORS, MULTIPLE_SIDECARS_WITHOUT_WORKLOAD_SELECTORS,
    REFERENCED_RESOURCE_NOT_FOUND,
};
use super::inventory::{Inventory, selector_string};
use crate::config::parse::Parsed;
use std::collections::BTreeMap;

fn name(parsed: &Parsed) -> String {
    format!(
        "{}/{}",
        parsed.config.meta.namespace, parsed.config.meta.name
    )
}

pub(super) fn analyze(inventory: &Inventory, out: &mut Vec<Message>) {
    let mut unselective: BTreeMap<&str, Vec<&Parsed>> = BTreeMap::new();
    // Pod (namespace/name) → the Sidecars selecting it.
    let mut selecting: BTreeMap<String, Vec<&Parsed>> = BTreeMap::new();
    for (parsed, sidecar) in inventory.sidecars() {
        let namespace = parsed.config.meta.namespace.as_str();
        let selector = sidecar
            .workload_selector
            .as_ref()
            .map(|w| &w.labels)
            .filter(|l| !l.is_empty());
        let Some(selector) = selector else {
            unselective.entry(namespace).or_default().push(parsed);
            continue;
        };
        if !inventory.has_pods() {
            continue;
        }
        let mut any = false;
        for pod in inventory.pods_matching(Some(namespace), selector) {
            any = true;
            selecting.entry(name(pod)).or_default().push(parsed);
        }
        if !any {
            out.push(Message::about(
                REFERENCED_RESOURCE_NOT_FOUND,
                parsed,
                format!(
                    "Referenced selector not found: {:?}",
                    selector_string(selector)
                ),
            ));
        }
    }
    for (namespace, list) in unselective {
        if list.len() < 2 {
            continue;
        }
        let names = list.iter().map(|p| name(p)).collect::<Vec<_>>().join(",");
        for parsed in list {
            out.push(Message::about(
                MULTIPLE_SIDECARS_WITHOUT_WORKLOAD_SELECTORS,
                parsed,
                format!("The Sidecars [{names}] in namespace {namespace:?} have no workload selector, which can lead to undefined behavior."),
            ));
        }
    }
    for (pod, list) in selecting {
        if list.len() < 2 {
            continue;
        }
        let names = list.iter().map(|p| name(p)).collect::<Vec<_>>().join(",");
        let (namespace, pod_name) = pod.split_once('/').unwrap_or(("", pod.as_str()));
        for parsed in list {
            out.push(Message::about(
                CONFLICTING_SIDECAR_WORKLOAD_SELECTORS,
                parsed,
                format!("The Sidecars [{names}] in namespace {namespace:?} select the same workload pod {pod_name:?}, which can lead to undefined behavior."),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::codes::{
        CONFLICTING_SIDECAR_WORKLOAD_SELECTORS, MULTIPLE_SIDECARS_WITHOUT_WORKLOAD_SELECTORS,
        REFERENCED_RESOURCE_NOT_FOUND,
    };
    use super::super::testing::findings_with;

    fn sidecar(name: &str, selector: &str) -> String {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n{selector}  egress: [{{hosts: ['./*']}}]\n"
        )
    }

    #[test]
    fn two_namespace_wide_sidecars_conflict() {
        let yaml = [sidecar("a", ""), sidecar("b", "")].concat();
        let got = findings_with(MULTIPLE_SIDECARS_WITHOUT_WORKLOAD_SELECTORS, &yaml);
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0],
            "IST0111 Error Sidecar shop/a: The Sidecars [shop/a,shop/b] in namespace \"shop\" have no workload selector, which can lead to undefined behavior."
        );
    }

    #[test]
    fn selectors_must_match_one_pod_and_no_pod_two_sidecars() {
        let web = "  workloadSelector: {labels: {app: web}}\n";
        let db = "  workloadSelector: {labels: {app: db}}\n";
        let pod = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: web-1, namespace: shop, labels: {app: web}}\nstatus: {podIP: 10.0.0.1}\n";
        let yaml = [
            sidecar("web", web),
            sidecar("web2", web),
            sidecar("db", db),
            pod.into(),
        ]
        .concat();
        assert_eq!(
            findings_with(REFERENCED_RESOURCE_NOT_FOUND, &yaml),
            ["IST0101 Error Sidecar shop/db: Referenced selector not found: \"app=db\""]
        );
        assert_eq!(
            findings_with(CONFLICTING_SIDECAR_WORKLOAD_SELECTORS, &yaml).len(),
            2
        );
        // Without Pods, selectors are not judged.
        let yaml = [sidecar("web", web), sidecar("db", db)].concat();
        assert!(findings_with(REFERENCED_RESOURCE_NOT_FOUND, &yaml).is_empty());
    }
}
