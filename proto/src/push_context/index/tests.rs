//! DestinationRules with a `workloadSelector`: they apply only to the proxies of their
//! namespace that they select, before the namespace-wide rules, and scopes stay shared
//! by every proxy they select alike.

use crate::config::istio;
use crate::model::{
    ExportTo, NamedConfig, NamespaceConfig, Protocol, Resolution, Service, ServicePort,
};
use crate::push_context::PushContext;
use crate::snapshot::Chunk;
use std::collections::BTreeMap;
use std::sync::Arc;

const HOST: &str = "carts.shop.svc.cluster.local";

fn carts() -> Service {
    Service {
        hostname: HOST.into(),
        namespace: "shop".into(),
        name: "carts".into(),
        ports: vec![ServicePort {
            name: "http".into(),
            port: 80,
            protocol: Protocol::Http,
        }],
        addresses: vec![],
        resolution: Resolution::ClientSideLb,
        mesh_external: false,
        export_to: ExportTo::default(),
        labels: Default::default(),
        clusters: vec!["c1".into()],
        external_name: String::new(),
    }
}

fn rule(
    ns: &str,
    name: &str,
    selector: Option<&[(&str, &str)]>,
    lb: &str,
) -> NamedConfig<istio::DestinationRule> {
    NamedConfig {
        name: name.into(),
        namespace: ns.into(),
        created: 0,
        spec: istio::DestinationRule {
            host: HOST.into(),
            traffic_policy: Some(istio::TrafficPolicy {
                load_balancer: Some(istio::LoadBalancerSettings {
                    simple: Some(lb.into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            workload_selector: selector.map(|labels| istio::WorkloadSelector {
                labels: labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            }),
            subsets: vec![istio::Subset {
                name: name.into(),
                ..Default::default()
            }],
            ..Default::default()
        },
    }
}

fn namespace(
    name: &str,
    services: Vec<Service>,
    rules: Vec<NamedConfig<istio::DestinationRule>>,
) -> Chunk {
    Chunk::Namespace(NamespaceConfig {
        namespace: name.into(),
        services,
        destination_rules: rules,
        ..Default::default()
    })
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The load balancer of the rule applying to a proxy, and the rules merged into it
/// (one subset each).
fn applied(pc: &PushContext, ns: &str, proxy: &[(&str, &str)]) -> (String, Vec<String>) {
    let scope = pc.sidecar_scope(ns, &labels(proxy));
    let Some(rule) = scope.destination_rule(HOST) else {
        return ("none".into(), vec![]);
    };
    let lb = rule
        .spec
        .traffic_policy
        .as_ref()
        .and_then(|tp| tp.load_balancer.as_ref())
        .and_then(|lb| lb.simple.clone())
        .unwrap_or_default();
    let subsets = rule.spec.subsets.iter().map(|s| s.name.clone()).collect();
    (lb, subsets)
}

#[test]
fn a_selecting_rule_comes_before_the_namespace_wide_one() {
    let pc = PushContext::from_chunks(
        1,
        [namespace(
            "shop",
            vec![carts()],
            vec![
                rule("shop", "all", None, "RANDOM"),
                rule("shop", "web", Some(&[("app", "web")]), "ROUND_ROBIN"),
                rule("shop", "web-too", Some(&[("app", "web")]), "LEAST_REQUEST"),
                rule(
                    "shop",
                    "canary",
                    Some(&[("app", "web"), ("track", "canary")]),
                    "PASSTHROUGH",
                ),
            ],
        )],
    );
    // Rules with one selector merge (the first policy kept); others stay apart.
    assert_eq!(
        applied(&pc, "shop", &[("app", "web")]),
        ("ROUND_ROBIN".into(), vec!["web".into(), "web-too".into()])
    );
    // Of two selecting rules with different selectors, the first by name.
    assert_eq!(
        applied(&pc, "shop", &[("app", "web"), ("track", "canary")]),
        ("PASSTHROUGH".into(), vec!["canary".into()])
    );
    // Not selected: the namespace-wide rule, alone.
    assert_eq!(
        applied(&pc, "shop", &[("app", "api")]),
        ("RANDOM".into(), vec!["all".into()])
    );
    // Selectors never reach across namespaces.
    assert_eq!(
        applied(&pc, "front", &[("app", "web")]),
        ("RANDOM".into(), vec!["all".into()])
    );
}

#[test]
fn an_unselected_proxy_falls_back_past_selector_only_namespaces() {
    let pc = PushContext::from_chunks(
        1,
        [
            namespace(
                "shop",
                vec![carts()],
                vec![rule("shop", "all", None, "RANDOM")],
            ),
            namespace(
                "front",
                vec![],
                vec![rule("front", "web", Some(&[("app", "web")]), "ROUND_ROBIN")],
            ),
        ],
    );
    assert_eq!(applied(&pc, "front", &[("app", "web")]).0, "ROUND_ROBIN");
    assert_eq!(applied(&pc, "front", &[("app", "api")]).0, "RANDOM");
}

#[test]
fn scopes_are_shared_by_proxies_selected_alike() {
    let pc = PushContext::from_chunks(
        1,
        [
            namespace(
                "shop",
                vec![carts()],
                vec![
                    rule("shop", "all", None, "RANDOM"),
                    rule("shop", "web", Some(&[("app", "web")]), "ROUND_ROBIN"),
                ],
            ),
            namespace("front", vec![], vec![]),
        ],
    );
    let scope = |ns: &str, l: &[(&str, &str)]| pc.sidecar_scope(ns, &labels(l));
    let web = scope("shop", &[("app", "web"), ("pod", "1")]);
    assert!(Arc::ptr_eq(
        &web,
        &scope("shop", &[("app", "web"), ("pod", "2")])
    ));
    assert!(Arc::ptr_eq(
        &scope("shop", &[("app", "api")]),
        &scope("shop", &[])
    ));
    assert!(!Arc::ptr_eq(&web, &scope("shop", &[])));
    // Their ids differ, so output cached by scope id differs too.
    assert_eq!(web.id, "shop/default+dr:web");
    assert_eq!(scope("shop", &[]).id, "shop/default");
    // No selector rules in the namespace: labels make no difference.
    assert!(Arc::ptr_eq(
        &scope("front", &[("app", "web")]),
        &scope("front", &[])
    ));
}

#[test]
fn only_namespaces_with_a_selector_tell_proxies_apart_by_label() {
    let mut front = NamespaceConfig {
        namespace: "front".into(),
        ..Default::default()
    };
    let sidecar = |name: &str, selector: Option<istio::WorkloadSelector>| NamedConfig {
        name: name.into(),
        namespace: "front".into(),
        created: 0,
        spec: istio::Sidecar {
            workload_selector: selector,
            ..Default::default()
        },
    };
    // A selector without labels selects nothing: the Sidecar is namespace-wide.
    front
        .sidecars
        .push(sidecar("all", Some(Default::default())));
    let pc = PushContext::from_chunks(
        1,
        [
            namespace(
                "shop",
                vec![carts()],
                vec![rule("shop", "web", Some(&[]), "RANDOM")],
            ),
            Chunk::Namespace(front.clone()),
            namespace("plain", vec![], vec![rule("plain", "all", None, "RANDOM")]),
        ],
    );
    let index = pc.index();
    assert!(index.selects_by_labels("shop"), "a selector rule");
    assert!(!index.selects_by_labels("front"));
    assert!(!index.selects_by_labels("plain"));
    assert!(!index.selects_by_labels("absent"));
    front.sidecars.push(sidecar(
        "web",
        Some(istio::WorkloadSelector {
            labels: labels(&[("app", "web")]),
        }),
    ));
    let pc = pc.with_changes(2, [Chunk::Namespace(front)], []);
    assert!(pc.index().selects_by_labels("front"), "a selecting Sidecar");
}
