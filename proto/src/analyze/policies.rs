//! `security.istio.io` policies, as Istio's authz analyzer judges them: a `selector`
//! that matches no Pod (IST0127, when Pods are given), and an AuthorizationPolicy naming
//! a source namespace that does not exist (IST0101, when Namespaces are given; `*`
//! wildcards are left alone).

use super::Message;
use super::codes::{NO_MATCHING_WORKLOADS_FOUND, REFERENCED_RESOURCE_NOT_FOUND};
use super::inventory::{Inventory, selector_string};
use crate::config::Spec;
use crate::config::parse::Parsed;
use crate::config::security::PolicySelector;
use std::collections::BTreeSet;

fn selector(parsed: &Parsed) -> Option<&PolicySelector> {
    match &parsed.config.spec {
        Spec::PeerAuthentication(p) => p.selector.as_ref(),
        Spec::AuthorizationPolicy(p) => p.selector.as_ref(),
        Spec::RequestAuthentication(p) => p.selector.as_ref(),
        _ => None,
    }
}

pub(super) fn analyze(inventory: &Inventory, root_namespace: &str, out: &mut Vec<Message>) {
    let policies: Vec<&Parsed> = inventory.security_policies().collect();
    if inventory.has_pods() {
        for parsed in &policies {
            let Some(labels) = selector(parsed).map(|s| &s.match_labels) else {
                continue;
            };
            if labels.is_empty() {
                continue;
            }
            // A policy of the root namespace selects in every namespace.
            let namespace = parsed.config.meta.namespace.as_str();
            let scope = (namespace != root_namespace).then_some(namespace);
            if inventory.pods_matching(scope, labels).next().is_none() {
                out.push(Message::about(
                    NO_MATCHING_WORKLOADS_FOUND,
                    parsed,
                    format!(
                        "No matching workloads for this resource with the following labels: {}",
                        selector_string(labels)
                    ),
                ));
            }
        }
    }
    let namespaces: BTreeSet<&str> = inventory.namespace_names().collect();
    if namespaces.is_empty() {
        return;
    }
    for parsed in &policies {
        let Spec::AuthorizationPolicy(policy) = &parsed.config.spec else {
            continue;
        };
        let named = policy
            .rules
            .iter()
            .flat_map(|r| r.from.iter())
            .filter_map(|f| f.source.as_ref())
            .flat_map(|s| s.namespaces.iter().chain(&s.not_namespaces));
        let mut reported = BTreeSet::new();
        for ns in named {
            if ns.contains('*') || namespaces.contains(ns.as_str()) || !reported.insert(ns) {
                continue;
            }
            out.push(Message::about(
                REFERENCED_RESOURCE_NOT_FOUND,
                parsed,
                format!("Referenced namespace not found: {ns:?}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::analyze;
    use crate::config::parse::parse_documents;

    fn findings(yaml: &str) -> Vec<String> {
        let docs = parse_documents("p.yaml", yaml);
        analyze(&docs)
            .iter()
            .map(|m| {
                format!(
                    "{} {} {}: {}",
                    m.code.id, m.code.level, m.origin.object, m.text
                )
            })
            .collect()
    }

    #[test]
    fn selectors_without_workloads_and_unknown_namespaces_are_reported() {
        let yaml = "apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: shop, labels: {app: web}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  rules: [{from: [{source: {namespaces: [shop, gone, 'team-*']}}]}]
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: db, namespace: shop}
spec:
  selector: {matchLabels: {app: db}}
  mtls: {mode: STRICT}
";
        assert_eq!(
            findings(yaml),
            [
                "IST0101 Error AuthorizationPolicy shop/web: Referenced namespace not found: \"gone\"",
                "IST0127 Warning PeerAuthentication shop/db: No matching workloads for this resource with the following labels: app=db",
            ]
        );
    }
}
