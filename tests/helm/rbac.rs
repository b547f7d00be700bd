//! Ingest's RBAC: read-only, on exactly what it watches. The edge's: the CA's two
//! Secrets in the release namespace, and istio-ca-root-cert's writes.

use crate::chart::{
    NAMESPACE, Rendered, containers, env_named, every_values_file, name, pod_spec, strings,
};
use serde_json::Value;
use shoal_ingest::kubernetes::{Scope, WATCHED};
use std::collections::BTreeSet;

/// Granted in the release namespace only: remote secrets, read by
/// `shoal_ingest::kubernetes::remote`, and the kinds watched in the system namespace only
/// (the mesh config's ConfigMaps).
const NAMESPACED_ALLOWANCE: &[(&str, &str)] = &[("", "secrets"), ("", "configmaps")];

const READ_VERBS: [&str; 3] = ["get", "list", "watch"];

/// (apiGroup, resource) → verbs, from the rules of one Role or ClusterRole.
fn grants(role: &Value) -> Vec<(String, String, BTreeSet<String>)> {
    let mut out = Vec::new();
    for rule in role["rules"].as_array().unwrap() {
        let verbs: BTreeSet<String> = strings(&rule["verbs"])
            .into_iter()
            .map(Into::into)
            .collect();
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                out.push((group.to_owned(), resource.to_owned(), verbs.clone()));
            }
        }
    }
    out
}

/// The roles (`Role` or `ClusterRole`) bound by `binding_kind` to ingest's ServiceAccount.
fn roles_bound_to_ingest<'a>(r: &'a Rendered, binding_kind: &str) -> Vec<&'a Value> {
    roles_bound_to(r, "ingest", binding_kind)
}

/// The roles (`Role` or `ClusterRole`) bound by `binding_kind` to `tier`'s ServiceAccount
/// (built-in ClusterRoles, which the chart does not render, left out).
fn roles_bound_to<'a>(r: &'a Rendered, tier: &str, binding_kind: &str) -> Vec<&'a Value> {
    let account = pod_spec(r.deployment_of(tier))["serviceAccountName"]
        .as_str()
        .expect("the tier runs as its own ServiceAccount");
    r.find("ServiceAccount", account);
    r.of_kind(binding_kind)
        .filter(|b| {
            b["subjects"].as_array().unwrap().iter().any(|s| {
                s["kind"] == "ServiceAccount" && s["name"] == account && s["namespace"] == NAMESPACE
            })
        })
        .filter(|b| {
            !b["roleRef"]["name"]
                .as_str()
                .unwrap()
                .starts_with("system:")
        })
        .map(|b| {
            let role_kind = b["roleRef"]["kind"].as_str().unwrap();
            r.find(role_kind, b["roleRef"]["name"].as_str().unwrap())
        })
        .collect()
}

#[test]
fn ingest_may_read_what_it_watches_and_nothing_more() {
    for r in every_values_file() {
        let ingest_roles = roles_bound_to_ingest(r, "ClusterRoleBinding")
            .into_iter()
            .chain(roles_bound_to_ingest(r, "RoleBinding"));
        for role in ingest_roles {
            for (group, resource, verbs) in grants(role) {
                assert!(
                    verbs.iter().all(|v| READ_VERBS.contains(&v.as_str())),
                    "{}: {} grants {verbs:?} on {group}/{resource}",
                    r.values_file,
                    name(role)
                );
                assert!(group != "*" && resource != "*", "no wildcards");
            }
        }

        let cluster_wide: Vec<_> = roles_bound_to_ingest(r, "ClusterRoleBinding")
            .into_iter()
            .flat_map(grants)
            .collect();
        let reads = |group: &str, resource: &str| {
            cluster_wide.iter().any(|(g, res, verbs)| {
                g == group && res == resource && READ_VERBS.iter().all(|v| verbs.contains(*v))
            })
        };
        let watched_or_reported = || {
            WATCHED
                .iter()
                .chain(shoal_ingest::kubernetes::REPORTED)
                .filter(|w| w.scope != Scope::System)
        };
        for watched in watched_or_reported() {
            assert!(
                reads(watched.group, watched.plural),
                "{}: ingest watches {}/{} but may not get, list and watch it",
                r.values_file,
                watched.group,
                watched.plural
            );
        }
        for (group, resource, _) in &cluster_wide {
            let watched = watched_or_reported().any(|w| w.group == group && w.plural == resource);
            assert!(
                watched,
                "{}: ingest may read {group}/{resource}, which it does not watch",
                r.values_file
            );
        }
    }
}

#[test]
fn remote_cluster_secrets_are_granted_only_in_the_release_namespace() {
    for r in every_values_file() {
        let roles = roles_bound_to_ingest(r, "RoleBinding");
        assert!(
            !roles.is_empty(),
            "{}: no Role for remote secrets",
            r.values_file
        );
        for role in roles {
            assert_eq!(role["kind"], "Role", "a RoleBinding to a ClusterRole");
            assert_eq!(role["metadata"]["namespace"], NAMESPACE);
            for (group, resource, _) in grants(role) {
                assert!(
                    NAMESPACED_ALLOWANCE.contains(&(group.as_str(), resource.as_str())),
                    "{}: {} grants {group}/{resource}",
                    r.values_file,
                    name(role)
                );
            }
        }
        // Where the remote-secret watch will look: the namespace the Role grants.
        let ingest = &containers(r.deployment_of("ingest"))[0];
        let system = env_named(ingest, "SHOAL_SYSTEM_NAMESPACE").expect("the system namespace");
        assert_eq!(system["value"], NAMESPACE);
    }
}

#[test]
fn system_namespace_kinds_are_granted_there_only() {
    for r in every_values_file() {
        let namespaced: Vec<_> = roles_bound_to_ingest(r, "RoleBinding")
            .into_iter()
            .filter(|role| role["metadata"]["namespace"] == NAMESPACE)
            .flat_map(grants)
            .collect();
        for watched in WATCHED.iter().filter(|w| w.scope == Scope::System) {
            assert!(
                namespaced.iter().any(|(g, res, verbs)| {
                    g == watched.group
                        && res == watched.plural
                        && READ_VERBS.iter().all(|v| verbs.contains(*v))
                }),
                "{}: ingest watches {}/{} in the system namespace but may not read it there",
                r.values_file,
                watched.group,
                watched.plural
            );
        }
    }
}

/// One rule's grant, resource names included (none: every object).
type Grant = (String, Vec<String>, Vec<String>);

fn edge_grants(role: &Value) -> Vec<Grant> {
    let mut out: Vec<Grant> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|rule| {
            assert_eq!(strings(&rule["apiGroups"]), [""], "core resources only");
            let mut verbs: Vec<String> = strings(&rule["verbs"])
                .into_iter()
                .map(Into::into)
                .collect();
            verbs.sort();
            let mut names: Vec<String> = strings(&rule["resourceNames"])
                .into_iter()
                .map(Into::into)
                .collect();
            names.sort();
            strings(&rule["resources"])
                .into_iter()
                .map(move |res| (res.to_string(), names.clone(), verbs.clone()))
        })
        .collect();
    out.sort();
    out
}

fn grant(resource: &str, names: &[&str], verbs: &[&str]) -> Grant {
    let mut verbs: Vec<String> = verbs.iter().map(|v| v.to_string()).collect();
    verbs.sort();
    (
        resource.into(),
        names.iter().map(|n| n.to_string()).collect(),
        verbs,
    )
}

#[test]
fn the_edge_may_keep_the_ca_secrets_and_publish_the_root_and_nothing_more() {
    for r in every_values_file() {
        let edge = &containers(r.deployment_of("edge"))[0];
        let args: shoal_edge::cli::Args = crate::cli::parse("edge", &strings(&edge["args"]));
        let ca = r.value("edge.security.caFromKubernetes").as_bool().unwrap();
        let publish = r.value("edge.security.publishRootCert").as_bool().unwrap();
        assert_eq!(args.security.ca_from_kubernetes, ca, "{}", r.values_file);
        assert_eq!(
            args.security.publish_root_cert, publish,
            "{}",
            r.values_file
        );

        // The CA's Secrets: in the release namespace, which is the edge's system namespace.
        let namespaced: Vec<Grant> = roles_bound_to(r, "edge", "RoleBinding")
            .into_iter()
            .inspect(|role| {
                assert_eq!(role["kind"], "Role");
                assert_eq!(role["metadata"]["namespace"], NAMESPACE);
            })
            .flat_map(edge_grants)
            .collect();
        let expected = if ca {
            vec![
                grant("secrets", &[], &["create"]),
                grant(
                    "secrets",
                    &["cacerts", "istio-ca-secret"],
                    &["get", "list", "watch"],
                ),
                grant("secrets", &["istio-ca-secret"], &["update"]),
            ]
        } else {
            vec![]
        };
        assert_eq!(namespaced, expected, "{}", r.values_file);
        assert_eq!(args.listen.system_namespace, NAMESPACE);

        let cluster_wide: Vec<Grant> = roles_bound_to(r, "edge", "ClusterRoleBinding")
            .into_iter()
            .flat_map(edge_grants)
            .collect();
        let expected = if publish {
            vec![
                grant(
                    "configmaps",
                    &[],
                    &["get", "list", "watch", "create", "update"],
                ),
                grant("namespaces", &[], &["get", "list", "watch"]),
            ]
        } else {
            vec![]
        };
        assert_eq!(cluster_wide, expected, "{}", r.values_file);
    }
}
