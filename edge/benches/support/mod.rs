//! The PushContext of a synthetic mesh's first snapshot (`shoal_test_support::fixtures`:
//! the chunks the builder would build, proven so in `builder/tests/fixtures.rs`), and the
//! proxies of a fleet spread over it.

#![allow(dead_code)]

use shoal_edge::proxy::{InterceptionMode, Proxy, ProxyKind, ProxyType};
use shoal_proto::xds::node_metadata::NodeId;
use shoal_test_support::fixtures::CLUSTER;
use shoal_test_support::meshgen::{Mesh, MeshSpec};
use std::collections::BTreeMap;

pub use shoal_test_support::fixtures::push_context;

/// 1k services of 10 endpoints in 10 namespaces (meshgen's default fractions), with a
/// Sidecar narrowing egress to its own namespace in every namespace, or in none.
pub fn spec(services: usize, sidecars: bool) -> MeshSpec {
    MeshSpec {
        services,
        endpoints_per_service: 10,
        namespaces: 10,
        sidecar_fraction: if sidecars { 1.0 } else { 0.0 },
        ..MeshSpec::default()
    }
}

/// Proxy `i` of a fleet spread evenly over the mesh's namespaces, as a pod of one of the
/// namespace's services (`app: svc-<n>`).
pub fn proxy(mesh: &Mesh, i: usize) -> Proxy {
    let namespaces = mesh.spec.namespaces.max(1);
    let svc = &mesh.services[i % mesh.services.len()];
    debug_assert_eq!(svc.namespace, format!("ns-{}", i % namespaces));
    let labels = [("app", svc.name.as_str()), ("version", "v1")];
    sidecar(
        format!("10.200.{}.{}", (i >> 8) & 0xff, i & 0xff),
        &format!("{}-{i}", svc.name),
        &svc.namespace,
        &labels,
    )
}

/// A captured sidecar of pod `pod` in `namespace`, at `ip`, labelled `labels`.
pub fn sidecar(ip: String, pod: &str, namespace: &str, labels: &[(&str, &str)]) -> Proxy {
    Proxy {
        id: NodeId::format(ProxyType::Sidecar, &ip, pod, namespace),
        kind: ProxyKind::Sidecar,
        workload: format!("{pod}.{namespace}"),
        ip,
        namespace: namespace.to_string(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        interception: InterceptionMode::Redirect,
        cluster_id: CLUSTER.into(),
        network: String::new(),
        locality: String::new(),
        identity: shoal_proto::security::Identity::Anonymous,
    }
}
