use super::*;
use crate::config::security::{PeerMutualTls, PolicySelector};

fn named<T>(namespace: &str, name: &str, created: i64, spec: T) -> NamedConfig<T> {
    NamedConfig {
        name: name.into(),
        namespace: namespace.into(),
        created,
        spec,
    }
}

fn selector(pairs: &[(&str, &str)]) -> Option<PolicySelector> {
    Some(PolicySelector {
        match_labels: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    })
}

fn peer(
    mode: &str,
    selector: Option<PolicySelector>,
    ports: &[(&str, &str)],
) -> PeerAuthentication {
    PeerAuthentication {
        selector,
        mtls: Some(PeerMutualTls {
            mode: Some(mode.into()),
        }),
        port_level_mtls: ports
            .iter()
            .map(|(p, m)| {
                (
                    p.to_string(),
                    PeerMutualTls {
                        mode: Some(m.to_string()),
                    },
                )
            })
            .collect(),
    }
}

fn index(configs: Vec<NamespaceConfig>) -> SecurityPolicies {
    let namespaces = configs
        .into_iter()
        .map(|c| (c.namespace.clone(), Arc::new(c)))
        .collect();
    SecurityPolicies::build("istio-system", &namespaces)
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn peer_authentication_composes_mesh_namespace_workload_and_port_as_istio() {
    let web = labels(&[("app", "web")]);
    // No policy: PERMISSIVE.
    assert_eq!(
        index(vec![]).peer_authentication("shop", &web),
        PeerAuthn::default()
    );
    let policies = index(vec![
        NamespaceConfig {
            namespace: "istio-system".into(),
            peer_authentications: vec![
                named("istio-system", "mesh", 10, peer("STRICT", None, &[])),
                // A younger mesh-wide policy loses to the oldest.
                named("istio-system", "mesh-2", 20, peer("DISABLE", None, &[])),
            ],
            ..Default::default()
        },
        NamespaceConfig {
            namespace: "shop".into(),
            peer_authentications: vec![
                named("shop", "ns", 10, peer("PERMISSIVE", None, &[])),
                named(
                    "shop",
                    "web",
                    10,
                    peer(
                        "UNSET",
                        selector(&[("app", "web")]),
                        &[("8080", "DISABLE"), ("9090", "UNSET")],
                    ),
                ),
            ],
            ..Default::default()
        },
    ]);
    // The mesh's STRICT everywhere without a namespace policy.
    assert_eq!(
        policies.peer_authentication("other", &web).mode,
        MtlsMode::Strict
    );
    // shop: the namespace's PERMISSIVE; the workload's UNSET inherits it; its port
    // 8080 DISABLE, and 9090 UNSET takes the composed mode.
    let composed = policies.peer_authentication("shop", &web);
    assert_eq!(composed.mode, MtlsMode::Permissive);
    assert_eq!(composed.mode_for(8080), MtlsMode::Disable);
    assert_eq!(composed.mode_for(9090), MtlsMode::Permissive);
    assert_eq!(composed.mode_for(7000), MtlsMode::Permissive);
    // A workload the selector does not match gets the namespace level only.
    let db = policies.peer_authentication("shop", &labels(&[("app", "db")]));
    assert_eq!(db.mode, MtlsMode::Permissive);
    assert!(db.ports.is_empty());
}

#[test]
fn the_oldest_workload_policy_wins_and_root_namespace_selectors_apply_mesh_wide() {
    let web = labels(&[("app", "web")]);
    let policies = index(vec![
        NamespaceConfig {
            namespace: "istio-system".into(),
            peer_authentications: vec![named(
                "istio-system",
                "web-strict",
                5,
                peer("STRICT", selector(&[("app", "web")]), &[]),
            )],
            ..Default::default()
        },
        NamespaceConfig {
            namespace: "shop".into(),
            peer_authentications: vec![named(
                "shop",
                "web-off",
                9,
                peer("DISABLE", selector(&[("app", "web")]), &[]),
            )],
            ..Default::default()
        },
    ]);
    assert_eq!(
        policies.peer_authentication("shop", &web).mode,
        MtlsMode::Strict
    );
}

fn authz(action: Option<&str>, selector: Option<PolicySelector>) -> AuthorizationPolicy {
    AuthorizationPolicy {
        selector,
        action: action.map(Into::into),
        ..Default::default()
    }
}

#[test]
fn authorization_policies_apply_by_namespace_root_and_selector_grouped_by_action() {
    let web = labels(&[("app", "web")]);
    let gateway_ref = AuthorizationPolicy {
        target_ref: Some(Default::default()),
        ..Default::default()
    };
    let policies = index(vec![
        NamespaceConfig {
            namespace: "istio-system".into(),
            authorization_policies: vec![
                named("istio-system", "global-deny", 0, authz(Some("DENY"), None)),
                named(
                    "istio-system",
                    "ext",
                    0,
                    authz(Some("CUSTOM"), selector(&[("app", "web")])),
                ),
            ],
            ..Default::default()
        },
        NamespaceConfig {
            namespace: "shop".into(),
            authorization_policies: vec![
                named(
                    "shop",
                    "b-allow",
                    0,
                    authz(None, selector(&[("app", "web")])),
                ),
                named("shop", "a-allow", 0, authz(Some("ALLOW"), None)),
                named("shop", "audit", 0, authz(Some("AUDIT"), None)),
                named(
                    "shop",
                    "db-only",
                    0,
                    authz(None, selector(&[("app", "db")])),
                ),
                named("shop", "by-ref", 0, gateway_ref),
            ],
            ..Default::default()
        },
    ]);
    let names = |list: &[Arc<NamedConfig<AuthorizationPolicy>>]| -> Vec<String> {
        list.iter()
            .map(|p| format!("{}/{}", p.namespace, p.name))
            .collect()
    };
    let got = policies.authorization("shop", &web);
    assert_eq!(names(&got.custom), ["istio-system/ext"]);
    assert_eq!(names(&got.deny), ["istio-system/global-deny"]);
    assert_eq!(names(&got.allow), ["shop/a-allow", "shop/b-allow"]);
    assert_eq!(names(&got.audit), ["shop/audit"]);
    // Another namespace: the root namespace's only.
    let other = policies.authorization("other", &labels(&[]));
    assert_eq!(names(&other.deny), ["istio-system/global-deny"]);
    assert!(other.allow.is_empty() && other.custom.is_empty());
    assert!(!policies.is_empty());
    assert!(index(vec![]).authorization("shop", &web).is_empty());
}

#[test]
fn request_authentications_apply_like_authorization_policies() {
    let policies = index(vec![NamespaceConfig {
        namespace: "shop".into(),
        request_authentications: vec![
            named(
                "shop",
                "jwt",
                0,
                RequestAuthentication {
                    selector: selector(&[("app", "web")]),
                    ..Default::default()
                },
            ),
            named("shop", "all", 0, RequestAuthentication::default()),
        ],
        ..Default::default()
    }]);
    let got = policies.request_authentication("shop", &labels(&[("app", "web")]));
    let names: Vec<&str> = got.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["all", "jwt"]);
    assert_eq!(
        policies.request_authentication("shop", &labels(&[])).len(),
        1
    );
}
