//! `security.istio.io` policies, as Istio's authz analyzer judges them: a `selector`
//! that matches no Pod (IST0127, when Pods are given), an AuthorizationPolicy naming
//! a source namespace that does not exist (IST0101, when Namespaces are given: in
//! `namespaces`, `principals` and `serviceAccounts`) or a service account no Pod runs as
//! (IST0101, when Pods are given; `*` wildcards are left alone), and a CUSTOM policy whose ext_authz provider the mesh
//! config does not define or Shoal cannot use (IST0101, when a mesh config is given):
//! its rules then deny.

use super::Message;
use super::codes::{NO_MATCHING_WORKLOADS_FOUND, REFERENCED_RESOURCE_NOT_FOUND};
use super::hosts::ServiceHosts;
use super::inventory::{Inventory, selector_string};
use crate::config::Spec;
use crate::config::parse::Parsed;
use crate::config::security::PolicySelector;
use crate::push_context::security::ext_authz::{self, ServiceLookup};
use std::collections::BTreeSet;

fn selector(parsed: &Parsed) -> Option<&PolicySelector> {
    match &parsed.config.spec {
        Spec::PeerAuthentication(p) => p.selector.as_ref(),
        Spec::AuthorizationPolicy(p) => p.selector.as_ref(),
        Spec::RequestAuthentication(p) => p.selector.as_ref(),
        _ => None,
    }
}

impl ServiceLookup for ServiceHosts<'_> {
    fn namespaces_of(&self, hostname: &str) -> Vec<String> {
        ServiceHosts::namespaces_of(self, hostname)
    }
}

/// CUSTOM policies whose provider is not defined or cannot be used.
fn custom_providers(inventory: &Inventory, policies: &[&Parsed], out: &mut Vec<Message>) {
    let Some(mesh) = inventory.mesh_config() else {
        return;
    };
    let providers = ext_authz::resolve(mesh, &inventory.hosts);
    for parsed in policies {
        let Spec::AuthorizationPolicy(policy) = &parsed.config.spec else {
            continue;
        };
        if policy.action.as_deref() != Some("CUSTOM") {
            continue;
        }
        let name = policy.provider.as_ref().map_or("", |p| p.name.as_str());
        let why = match providers.get(name) {
            Some(Ok(_)) => continue,
            Some(Err(why)) => why.clone(),
            None => format!("extension provider {name:?} is not defined in the mesh config"),
        };
        out.push(Message::about(
            REFERENCED_RESOURCE_NOT_FOUND,
            parsed,
            format!("CUSTOM action cannot use its provider, so its rules deny: {why}"),
        ));
    }
}

pub(super) fn analyze(inventory: &Inventory, root_namespace: &str, out: &mut Vec<Message>) {
    let policies: Vec<&Parsed> = inventory.security_policies().collect();
    custom_providers(inventory, &policies, out);
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
    // The service accounts Pods run as, by namespace: known only when Pods are given.
    let accounts: BTreeSet<(&str, &str)> = inventory
        .pods()
        .map(|(p, pod)| {
            (
                p.config.meta.namespace.as_str(),
                pod.service_account.as_str(),
            )
        })
        .collect();
    if namespaces.is_empty() && accounts.is_empty() {
        return;
    }
    for parsed in &policies {
        let Spec::AuthorizationPolicy(policy) = &parsed.config.spec else {
            continue;
        };
        let sources = || {
            (policy.rules.iter())
                .flat_map(|r| r.from.iter())
                .filter_map(|f| f.source.as_ref())
        };
        let mut referenced: Vec<(&str, Option<&str>)> = Vec::new();
        for s in sources() {
            referenced.extend(
                s.namespaces
                    .iter()
                    .chain(&s.not_namespaces)
                    .map(|n| (n.as_str(), None)),
            );
            // `<trust domain>/ns/<ns>/sa/<sa>` and `<ns>/<sa>` name a namespace and account.
            let principals = s.principals.iter().chain(&s.not_principals);
            referenced.extend(principals.filter_map(|p| {
                let rest = p.split_once("/ns/")?.1;
                let (ns, sa) = rest.split_once("/sa/")?;
                Some((ns, Some(sa)))
            }));
            let accounts = s.service_accounts.iter().chain(&s.not_service_accounts);
            referenced.extend(accounts.filter_map(|a| {
                let (ns, sa) = a.split_once('/')?;
                Some((ns, Some(sa)))
            }));
        }
        let mut reported = BTreeSet::new();
        for (ns, sa) in referenced {
            if ns.contains('*') || sa.is_some_and(|sa| sa.contains('*')) {
                continue;
            }
            let text = if !namespaces.is_empty() && !namespaces.contains(ns) {
                format!("Referenced namespace not found: {ns:?}")
            } else if let Some(sa) = sa.filter(|_| !accounts.is_empty())
                && !accounts.contains(&(ns, sa))
            {
                format!("Referenced service account not found: \"{ns}/{sa}\" (no Pod runs as it)")
            } else {
                continue;
            };
            if reported.insert(text.clone()) {
                out.push(Message::about(REFERENCED_RESOURCE_NOT_FOUND, parsed, text));
            }
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
spec: {serviceAccountName: web}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  rules:
  - from: [{source: {namespaces: [shop, gone, 'team-*']}}]
  - from: [{source: {principals: [cluster.local/ns/shop/sa/web, cluster.local/ns/shop/sa/ghost, cluster.local/ns/away/sa/x, '*']}}]
  - from: [{source: {serviceAccounts: [shop/web, shop/ghost]}}]
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
                "IST0101 Error AuthorizationPolicy shop/web: Referenced namespace not found: \"away\"",
                "IST0101 Error AuthorizationPolicy shop/web: Referenced namespace not found: \"gone\"",
                "IST0101 Error AuthorizationPolicy shop/web: Referenced service account not found: \"shop/ghost\" (no Pod runs as it)",
                "IST0127 Warning PeerAuthentication shop/db: No matching workloads for this resource with the following labels: app=db",
            ]
        );
    }

    #[test]
    fn custom_policies_need_a_usable_provider() {
        let yaml = "apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    extensionProviders:
    - name: authz
      envoyExtAuthzHttp: {service: ext-authz.shop.svc.cluster.local, port: 8000}
    - name: broken
      envoyExtAuthzGrpc: {service: nowhere.svc.cluster.local, port: 9000}
---
apiVersion: v1
kind: Service
metadata: {name: ext-authz, namespace: shop}
spec: {ports: [{port: 8000}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: good, namespace: shop}
spec: {action: CUSTOM, provider: {name: authz}, rules: [{to: [{operation: {paths: [/x]}}]}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: unknown, namespace: shop}
spec: {action: CUSTOM, provider: {name: other}, rules: [{}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: broken, namespace: shop}
spec: {action: CUSTOM, provider: {name: broken}, rules: [{}]}
";
        assert_eq!(
            findings(yaml),
            [
                "IST0101 Error AuthorizationPolicy shop/unknown: CUSTOM action cannot use its provider, so its rules deny: extension provider \"other\" is not defined in the mesh config",
                "IST0101 Error AuthorizationPolicy shop/broken: CUSTOM action cannot use its provider, so its rules deny: extensionProviders[1] (\"broken\"): service nowhere.svc.cluster.local is not in the service registry",
            ]
        );
    }
}
