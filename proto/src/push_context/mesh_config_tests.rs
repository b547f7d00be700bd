//! The mesh config as the push context applies it: the root namespace, the `exportTo`
//! defaults of each kind, and the outbound policy.

use super::*;
use crate::change::ChangeKey;
use crate::config::mesh::{MeshConfig, MeshOutboundTrafficPolicy};
use crate::config::{ConfigKey, Kind, istio};
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

fn named<T>(ns: &str, name: &str, spec: T) -> NamedConfig<T> {
    NamedConfig {
        name: name.into(),
        namespace: ns.into(),
        created: 0,
        spec,
    }
}

fn system(mesh: MeshConfig) -> NamespaceConfig {
    NamespaceConfig {
        namespace: "istio-system".into(),
        mesh_configs: vec![named("istio-system", "istio", mesh)],
        ..Default::default()
    }
}

fn hosts(scope: &SidecarScope) -> Vec<&str> {
    scope.services.iter().map(|s| s.hostname.as_str()).collect()
}

fn context(namespaces: Vec<NamespaceConfig>) -> PushContext {
    PushContext::from_chunks(1, namespaces.into_iter().map(Chunk::Namespace))
}

fn sidecar(ns: &str, egress_hosts: &[&str]) -> NamedConfig<istio::Sidecar> {
    named(
        ns,
        "default",
        istio::Sidecar {
            egress: vec![istio::EgressListener {
                hosts: egress_hosts.iter().map(|h| h.to_string()).collect(),
                ..Default::default()
            }],
            ..Default::default()
        },
    )
}

fn vs(ns: &str, host: &str, export_to: &[&str]) -> NamedConfig<istio::VirtualService> {
    named(
        ns,
        "vs",
        istio::VirtualService {
            hosts: vec![host.into()],
            export_to: export_to.iter().map(|e| e.to_string()).collect(),
            ..Default::default()
        },
    )
}

fn dr(ns: &str, host: &str, export_to: &[&str]) -> NamedConfig<istio::DestinationRule> {
    named(
        ns,
        "dr",
        istio::DestinationRule {
            host: host.into(),
            export_to: export_to.iter().map(|e| e.to_string()).collect(),
            ..Default::default()
        },
    )
}

#[test]
fn without_a_mesh_config_istio_defaults_apply() {
    let pc = context(vec![NamespaceConfig {
        namespace: "b".into(),
        services: vec![svc("b", "y")],
        ..Default::default()
    }]);
    assert_eq!(pc.index().root_namespace, "istio-system");
    let scope = pc.sidecar_scope("a", &Default::default());
    assert_eq!(hosts(&scope), ["y.b.svc.cluster.local"]);
    assert_eq!(scope.outbound_mode, TrafficMode::AllowAny);
}

#[test]
fn default_service_export_to_hides_services_that_set_none() {
    let mut exported = svc("b", "public");
    exported.export_to = ExportTo(vec!["*".into()]);
    let b = NamespaceConfig {
        namespace: "b".into(),
        services: vec![svc("b", "y"), exported],
        ..Default::default()
    };
    let mesh = MeshConfig {
        default_service_export_to: vec![".".into()],
        ..Default::default()
    };
    let pc = context(vec![system(mesh), b]);
    assert_eq!(
        hosts(&pc.sidecar_scope("a", &Default::default())),
        ["public.b.svc.cluster.local"]
    );
    assert_eq!(
        hosts(&pc.sidecar_scope("b", &Default::default())),
        ["public.b.svc.cluster.local", "y.b.svc.cluster.local"]
    );
}

#[test]
fn default_virtual_service_and_destination_rule_export_to() {
    let host = "y.b.svc.cluster.local";
    let b = NamespaceConfig {
        namespace: "b".into(),
        services: vec![svc("b", "y")],
        virtual_services: vec![vs("b", host, &[])],
        destination_rules: vec![dr("b", host, &[])],
        ..Default::default()
    };
    let mesh = MeshConfig {
        default_virtual_service_export_to: vec![".".into()],
        default_destination_rule_export_to: vec!["~".into()],
        ..Default::default()
    };
    let pc = context(vec![system(mesh), b.clone()]);
    let from_a = pc.sidecar_scope("a", &Default::default());
    assert!(from_a.virtual_service_for(host).is_none());
    assert!(from_a.destination_rule(host).is_none());
    let from_b = pc.sidecar_scope("b", &Default::default());
    assert!(from_b.virtual_service_for(host).is_some());
    assert!(
        from_b.destination_rule(host).is_none(),
        "`~`: hidden from all"
    );

    // An object's own exportTo wins over the mesh's default.
    let mut own = b;
    own.virtual_services = vec![vs("b", host, &["a"])];
    own.destination_rules = vec![dr("b", host, &["*"])];
    let mesh = MeshConfig {
        default_virtual_service_export_to: vec![".".into()],
        default_destination_rule_export_to: vec!["~".into()],
        ..Default::default()
    };
    let pc = context(vec![system(mesh), own]);
    let from_a = pc.sidecar_scope("a", &Default::default());
    assert!(from_a.virtual_service_for(host).is_some());
    assert!(from_a.destination_rule(host).is_some());
}

#[test]
fn the_configured_root_namespace_applies_mesh_wide_and_istio_system_no_longer_does() {
    let mesh = MeshConfig {
        root_namespace: "mesh-root".into(),
        ..Default::default()
    };
    let root = NamespaceConfig {
        namespace: "mesh-root".into(),
        sidecars: vec![sidecar("mesh-root", &["./*"])],
        destination_rules: vec![dr("mesh-root", "*.svc.cluster.local", &[])],
        ..Default::default()
    };
    let mut old_root = system(mesh);
    old_root.sidecars = vec![sidecar("istio-system", &["istio-system/*"])];
    let b = NamespaceConfig {
        namespace: "b".into(),
        services: vec![svc("b", "y")],
        ..Default::default()
    };
    let c = NamespaceConfig {
        namespace: "c".into(),
        services: vec![svc("c", "z")],
        ..Default::default()
    };
    let pc = context(vec![root, old_root, b, c]);
    assert_eq!(pc.index().root_namespace, "mesh-root");
    let scope = pc.sidecar_scope("b", &Default::default());
    assert_eq!(scope.id, "mesh-root/default@b");
    assert_eq!(hosts(&scope), ["y.b.svc.cluster.local"]);
    // The root namespace's DestinationRules are the fallback of every proxy.
    assert_eq!(
        scope
            .destination_rule("y.b.svc.cluster.local")
            .map(|d| d.namespace.as_str()),
        Some("mesh-root")
    );
    let sidecar_change = |ns: &str| ChangeKey::Config(ConfigKey::new(Kind::Sidecar, ns, "default"));
    assert!(scope.depends_on(&sidecar_change("mesh-root")));
    assert!(!scope.depends_on(&sidecar_change("istio-system")));
}

#[test]
fn mesh_outbound_policy_is_the_default_a_sidecar_overrides() {
    let mesh = MeshConfig {
        outbound_traffic_policy: Some(MeshOutboundTrafficPolicy {
            mode: "REGISTRY_ONLY".into(),
        }),
        ..Default::default()
    };
    let mut allow = sidecar("b", &["*/*"]);
    // Read as written, whatever other fields the policy has.
    allow.spec.outbound_traffic_policy = serde_norway::from_str("mode: ALLOW_ANY").ok();
    let b = NamespaceConfig {
        namespace: "b".into(),
        sidecars: vec![allow],
        ..Default::default()
    };
    let pc = context(vec![system(mesh), b]);
    let a = pc.sidecar_scope("a", &Default::default());
    assert_eq!(a.outbound_mode, TrafficMode::RegistryOnly);
    let b = pc.sidecar_scope("b", &Default::default());
    assert_eq!(b.outbound_mode, TrafficMode::AllowAny);
}

#[test]
fn the_default_revision_mesh_config_wins_over_a_revision() {
    let mut ns = system(MeshConfig {
        root_namespace: "default-rev".into(),
        ..Default::default()
    });
    ns.mesh_configs.insert(
        0,
        named(
            "istio-system",
            "istio-canary",
            MeshConfig {
                root_namespace: "canary".into(),
                ..Default::default()
            },
        ),
    );
    assert_eq!(context(vec![ns]).index().root_namespace, "default-rev");
}

#[test]
fn a_mesh_config_change_pushes_every_proxy() {
    let old = system(MeshConfig::default());
    let new = system(MeshConfig {
        default_service_export_to: vec![".".into()],
        ..Default::default()
    });
    assert_eq!(
        crate::change::namespace_changes(Some(&old), Some(&new)),
        None
    );
    assert!(crate::change::namespace_changes(Some(&old), Some(&old)).is_some());
}
