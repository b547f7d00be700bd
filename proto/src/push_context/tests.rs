use super::*;
use crate::config::istio;
use crate::model::{ExportTo, NamedConfig, Protocol, Resolution, Service, ServicePort};

fn svc(ns: &str, name: &str) -> Service {
    Service {
        hostname: format!("{name}.{ns}.svc.cluster.local"),
        namespace: ns.into(),
        name: name.into(),
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

fn ns(name: &str, services: Vec<Service>) -> Chunk {
    Chunk::Namespace(NamespaceConfig {
        namespace: name.into(),
        services,
        ..Default::default()
    })
}

fn sidecar(ns: &str, hosts: &[&str]) -> NamedConfig<istio::Sidecar> {
    NamedConfig {
        name: "default".into(),
        namespace: ns.into(),
        created: 0,
        spec: istio::Sidecar {
            egress: vec![istio::EgressListener {
                hosts: hosts.iter().map(|h| h.to_string()).collect(),
                ..Default::default()
            }],
            ..Default::default()
        },
    }
}

#[test]
fn default_scope_sees_every_public_service() {
    let mut private = svc("b", "secret");
    private.export_to = ExportTo(vec![".".into()]);
    let pc = PushContext::from_chunks(
        1,
        [
            ns("a", vec![svc("a", "x")]),
            ns("b", vec![svc("b", "y"), private]),
        ],
    );
    let scope = pc.sidecar_scope("a", &Default::default());
    let hosts: Vec<_> = scope.services.iter().map(|s| s.hostname.as_str()).collect();
    assert_eq!(hosts, ["x.a.svc.cluster.local", "y.b.svc.cluster.local"]);
    let scope_b = pc.sidecar_scope("b", &Default::default());
    assert_eq!(scope_b.services.len(), 3);
}

#[test]
fn sidecar_narrows_egress() {
    let mut a = NamespaceConfig {
        namespace: "a".into(),
        services: vec![svc("a", "x")],
        ..Default::default()
    };
    a.sidecars.push(sidecar("a", &["./*"]));
    let pc = PushContext::from_chunks(1, [Chunk::Namespace(a), ns("b", vec![svc("b", "y")])]);
    let scope = pc.sidecar_scope("a", &Default::default());
    assert_eq!(scope.services.len(), 1);
    assert!(scope.has_host("x.a.svc.cluster.local"));
    assert!(!scope.has_host("y.b.svc.cluster.local"));
    assert_eq!(scope.id, "a/default@a");
}

#[test]
fn root_namespace_sidecar_applies_mesh_wide() {
    let root = NamespaceConfig {
        namespace: "istio-system".into(),
        sidecars: vec![sidecar("istio-system", &["./*"])],
        ..Default::default()
    };
    let pc = PushContext::from_chunks(
        1,
        [
            Chunk::Namespace(root),
            ns("a", vec![svc("a", "x")]),
            ns("b", vec![svc("b", "y")]),
        ],
    );
    let scope = pc.sidecar_scope("b", &Default::default());
    let hosts: Vec<_> = scope.services.iter().map(|s| s.hostname.as_str()).collect();
    assert_eq!(hosts, ["y.b.svc.cluster.local"]);
}

#[test]
fn endpoint_update_keeps_index_and_scopes() {
    let pc = PushContext::from_chunks(1, [ns("a", vec![svc("a", "x")])]);
    let scope = pc.sidecar_scope("a", &Default::default());
    let eps = crate::model::ServiceEndpoints {
        service: svc("a", "x").key(),
        endpoints: vec![],
    };
    let next = pc.with_changes(2, [Chunk::Endpoints(eps)], []);
    assert_eq!(next.version(), 2);
    assert!(Arc::ptr_eq(pc.index(), next.index()));
    assert!(Arc::ptr_eq(
        &scope,
        &next.sidecar_scope("a", &Default::default())
    ));
    assert!(next.endpoints(&svc("a", "x").key()).is_some());
    let removed = next.with_changes(3, [], [ChunkKey::Namespace("a".into())]);
    assert!(
        removed
            .sidecar_scope("a", &Default::default())
            .services
            .is_empty()
    );
}

#[test]
fn an_endpoint_change_names_the_addresses_it_moved() {
    let eps = |addresses: &[&str]| crate::model::ServiceEndpoints {
        service: svc("a", "x").key(),
        endpoints: addresses
            .iter()
            .map(|a| crate::model::Endpoint::at(*a, 8080, 80))
            .collect(),
    };
    let pc = PushContext::from_chunks(1, [ns("a", vec![svc("a", "x")])]);
    assert!(
        pc.targets_may_have_moved("10.0.0.9"),
        "a new index: unknown"
    );
    let one = pc.with_changes(2, [Chunk::Endpoints(eps(&["10.0.0.1", "10.0.0.2"]))], []);
    let other = one.with_changes(3, [Chunk::Endpoints(eps(&["10.0.0.2", "10.0.0.3"]))], []);
    for moved in ["10.0.0.1", "10.0.0.2", "10.0.0.3"] {
        assert!(
            other.targets_may_have_moved(moved),
            "{moved}: before or after"
        );
    }
    assert!(!other.targets_may_have_moved("10.0.0.9"));
    let gone = other.with_changes(4, [], [ChunkKey::Endpoints(svc("a", "x").key())]);
    assert!(
        gone.targets_may_have_moved("10.0.0.3"),
        "removed with its chunk"
    );
    assert!(!gone.targets_may_have_moved("10.0.0.1"));
    // A namespace change that leaves its Services as they were (routing, policy) moves
    // no target, though the index is new; one that changes a Service moves the
    // addresses of that Service's endpoints.
    let routing = gone.with_changes(5, [ns("a", vec![svc("a", "x")])], []);
    assert!(!Arc::ptr_eq(routing.index(), gone.index()));
    assert!(!routing.targets_may_have_moved("10.0.0.9"));
    let x = routing.with_changes(6, [Chunk::Endpoints(eps(&["10.0.0.4"]))], []);
    let added = x.with_changes(7, [ns("a", vec![svc("a", "x"), svc("a", "y")])], []);
    assert!(
        !added.targets_may_have_moved("10.0.0.4"),
        "a Service without endpoints added"
    );
    let mut tcp = svc("a", "x");
    tcp.ports[0].protocol = Protocol::Tcp;
    let reshaped = added.with_changes(8, [ns("a", vec![tcp, svc("a", "y")])], []);
    assert!(
        reshaped.targets_may_have_moved("10.0.0.4"),
        "its Service changed"
    );
    assert!(!reshaped.targets_may_have_moved("10.0.0.9"));
    let removed = reshaped.with_changes(9, [], [ChunkKey::Namespace("a".into())]);
    assert!(
        removed.targets_may_have_moved("10.0.0.4"),
        "its Services went"
    );
    assert!(!removed.targets_may_have_moved("10.0.0.9"));
}

#[test]
fn endpoints_id_changes_with_the_endpoints_only() {
    let eps = || crate::model::ServiceEndpoints {
        service: svc("a", "x").key(),
        endpoints: vec![],
    };
    let pc = PushContext::from_chunks(1, [ns("a", vec![svc("a", "x")])]);
    let with_eps = pc.with_changes(2, [Chunk::Endpoints(eps())], []);
    assert_ne!(pc.endpoints_id(), with_eps.endpoints_id());
    // A namespace change, or removing what is not there, keeps the endpoints and the id.
    let ns_change = with_eps.with_changes(
        3,
        [ns("a", vec![svc("a", "x"), svc("a", "y")])],
        [ChunkKey::Endpoints(svc("a", "y").key())],
    );
    assert_eq!(ns_change.endpoints_id(), with_eps.endpoints_id());
    // Any endpoint chunk written or removed draws a new id, never one seen before.
    let again = ns_change.with_changes(4, [Chunk::Endpoints(eps())], []);
    let removed = again.with_changes(5, [], [ChunkKey::Endpoints(svc("a", "x").key())]);
    let other = PushContext::from_chunks(1, [Chunk::Endpoints(eps())]);
    let ids = [&pc, &with_eps, &again, &removed, &other].map(|p| p.endpoints_id());
    let unique: std::collections::BTreeSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
}

#[test]
fn destination_rule_precedence() {
    let dr = |ns: &str, host: &str| NamedConfig {
        name: format!("dr-{ns}"),
        namespace: ns.to_string(),
        created: 0,
        spec: istio::DestinationRule {
            host: host.into(),
            ..Default::default()
        },
    };
    let a = NamespaceConfig {
        namespace: "a".into(),
        services: vec![svc("a", "x")],
        destination_rules: vec![dr("a", "x.a.svc.cluster.local")],
        ..Default::default()
    };
    let b = NamespaceConfig {
        namespace: "b".into(),
        destination_rules: vec![dr("b", "*.svc.cluster.local")],
        ..Default::default()
    };
    let pc = PushContext::from_chunks(1, [Chunk::Namespace(a), Chunk::Namespace(b)]);
    let from_b = pc.sidecar_scope("b", &Default::default());
    assert_eq!(
        from_b
            .destination_rule("x.a.svc.cluster.local")
            .unwrap()
            .name,
        "dr-b"
    );
    let from_c = pc.sidecar_scope("c", &Default::default());
    assert_eq!(
        from_c
            .destination_rule("x.a.svc.cluster.local")
            .unwrap()
            .name,
        "dr-a"
    );
}

/// A rule in an unrelated namespace never applies; several rules for one host in one
/// namespace are merged (subsets appended, the first traffic policy kept).
#[test]
fn destination_rules_of_unrelated_namespaces_are_ignored_and_same_host_rules_merge() {
    let subset = |name: &str| istio::Subset {
        name: name.into(),
        ..Default::default()
    };
    let lb = |simple: &str| istio::TrafficPolicy {
        load_balancer: Some(istio::LoadBalancerSettings {
            simple: Some(simple.into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let dr = |ns: &str, name: &str, subsets: Vec<istio::Subset>, tp| NamedConfig {
        name: name.into(),
        namespace: ns.to_string(),
        created: 0,
        spec: istio::DestinationRule {
            host: "x.a.svc.cluster.local".into(),
            subsets,
            traffic_policy: tp,
            ..Default::default()
        },
    };
    let a = NamespaceConfig {
        namespace: "a".into(),
        services: vec![svc("a", "x")],
        destination_rules: vec![
            dr("a", "one", vec![subset("v1")], None),
            dr(
                "a",
                "two",
                vec![subset("v1"), subset("v2")],
                Some(lb("RANDOM")),
            ),
        ],
        ..Default::default()
    };
    let unrelated = NamespaceConfig {
        namespace: "b".into(),
        destination_rules: vec![dr("b", "elsewhere", vec![subset("v9")], None)],
        ..Default::default()
    };
    let pc = PushContext::from_chunks(1, [Chunk::Namespace(a), Chunk::Namespace(unrelated)]);
    let from_c = pc.sidecar_scope("c", &Default::default());
    let rule = from_c.destination_rule("x.a.svc.cluster.local").unwrap();
    let subsets: Vec<_> = rule.spec.subsets.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(subsets, ["v1", "v2"], "b's rule is not c's nor x's");
    assert_eq!(rule.spec.traffic_policy, Some(lb("RANDOM")));
}

#[test]
fn destination_rule_candidates_are_the_matching_rules_in_index_order() {
    let dr = |ns: &str, name: &str, host: &str| NamedConfig {
        name: name.into(),
        namespace: ns.to_string(),
        created: 0,
        spec: istio::DestinationRule {
            host: host.into(),
            ..Default::default()
        },
    };
    let config = |name: &str, rules| {
        Chunk::Namespace(NamespaceConfig {
            namespace: name.into(),
            destination_rules: rules,
            ..Default::default()
        })
    };
    let pc = PushContext::from_chunks(
        1,
        [
            config(
                "a",
                vec![
                    dr("a", "1", "x.a.svc.cluster.local"),
                    dr("a", "2", "*.a.svc.cluster.local"),
                    dr("a", "3", "x.a.svc.cluster.local"),
                ],
            ),
            config(
                "b",
                vec![dr("b", "4", "*"), dr("b", "5", "y.a.svc.cluster.local")],
            ),
            config(
                "c",
                vec![
                    dr("c", "6", "x.a.svc.cluster.local"),
                    dr("c", "7", "*.svc.cluster.local"),
                ],
            ),
        ],
    );
    let index = pc.index();
    for host in [
        "x.a.svc.cluster.local",
        "y.a.svc.cluster.local",
        "z.b.svc.cluster.local",
        "example.com",
    ] {
        let got: Vec<&str> = index
            .destination_rule_candidates(host)
            .filter(|dr| crate::model::host_matches(&dr.spec.host, host))
            .map(|dr| dr.name.as_str())
            .collect();
        let want: Vec<&str> = index
            .destination_rules
            .iter()
            .filter(|dr| crate::model::host_matches(&dr.spec.host, host))
            .map(|dr| dr.name.as_str())
            .collect();
        assert_eq!(got, want, "{host}");
    }
    let all: Vec<&str> = index
        .destination_rule_candidates("x.a.svc.cluster.local")
        .map(|dr| dr.name.as_str())
        .collect();
    assert_eq!(all, ["1", "2", "3", "4", "6", "7"]);
}

/// Istio's conflicting VirtualServices (`sortConfigByCreationTime`,
/// `SelectVirtualServices`): of two for one host the oldest wins, whichever namespace
/// it is in; one private to the proxy's namespace comes before every public one. The
/// creation time is read from `metadata.creationTimestamp`.
#[test]
fn of_conflicting_virtual_services_the_oldest_wins() {
    let yaml = |ns: &str, name: &str, created: &str, export: &str| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  \
             name: {name}\n  namespace: {ns}\n  creationTimestamp: \"{created}\"\n\
             spec:\n  hosts: [x.a.svc.cluster.local]\n  exportTo: [{export}]\n  \
             http:\n  - route: [{{destination: {{host: x.a.svc.cluster.local}}}}]\n"
        )
    };
    let vs = |ns: &str, name: &str, created: &str, export: &str| {
        let parsed =
            crate::config::parse::parse_documents("vs.yaml", &yaml(ns, name, created, export));
        let config = parsed.into_iter().next().unwrap().unwrap().config;
        let crate::config::Spec::VirtualService(spec) = config.spec else {
            panic!("not a VirtualService")
        };
        NamedConfig {
            name: name.into(),
            namespace: ns.into(),
            created: config.meta.created_seconds(),
            spec,
        }
    };
    let newer_here = vs("a", "a-newer", "2024-05-02T00:00:00Z", "\"*\"");
    let older_there = vs("b", "z-older", "2024-05-01T00:00:00+02:00", "\"*\"");
    assert_eq!(older_there.created, 1_714_514_400);
    let chunk = |name: &str, vss: Vec<NamedConfig<istio::VirtualService>>| {
        Chunk::Namespace(NamespaceConfig {
            namespace: name.into(),
            services: if name == "a" {
                vec![svc("a", "x")]
            } else {
                vec![]
            },
            virtual_services: vss,
            ..Default::default()
        })
    };
    let pc = PushContext::from_chunks(
        1,
        [
            chunk("a", vec![newer_here.clone()]),
            chunk("b", vec![older_there.clone()]),
        ],
    );
    let scope = pc.sidecar_scope("a", &Default::default());
    let first = scope.virtual_service_for("x.a.svc.cluster.local").unwrap();
    assert_eq!(
        first.name, "z-older",
        "the oldest wins, not the proxy's namespace"
    );

    // A VirtualService private to the proxy's namespace comes first.
    let private_newer = vs("a", "a-newer", "2024-05-02T00:00:00Z", "\".\"");
    let pc = PushContext::from_chunks(
        2,
        [
            chunk("a", vec![private_newer]),
            chunk("b", vec![older_there]),
        ],
    );
    let scope = pc.sidecar_scope("a", &Default::default());
    let first = scope.virtual_service_for("x.a.svc.cluster.local").unwrap();
    assert_eq!(first.name, "a-newer");
}

#[test]
fn the_moved_addresses_are_those_targets_may_have_moved_answers_for() {
    let pc = PushContext::from_chunks(1, [ns("a", vec![svc("a", "x")])]);
    assert!(
        pc.moved_addresses().is_none(),
        "made from nothing: every address"
    );
    let eps = crate::model::ServiceEndpoints {
        service: svc("a", "x").key(),
        endpoints: vec![crate::model::Endpoint::at("10.0.0.1", 8080, 80)],
    };
    let next = pc.with_changes(2, [Chunk::Endpoints(eps)], []);
    let moved: Vec<&String> = next.moved_addresses().unwrap().iter().collect();
    assert_eq!(moved, ["10.0.0.1"]);
}
