//! A PushContext from a synthetic mesh, built the way production builds it: meshgen YAML
//! → `parse_documents` → config KV entries → builder `Replica` → `SnapshotBuilder` →
//! encoded chunks → decoded chunks → `PushContext::from_chunks`.

#![allow(dead_code)]

use shoal_builder::replica::Replica;
use shoal_builder::snapshot::SnapshotBuilder;
use shoal_edge::proxy::{InterceptionMode, Proxy, ProxyType};
use shoal_proto::config::parse::parse_documents;
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::Chunk;
use shoal_proto::transport::{KvEntry, config_kv_key, encode_config};
use shoal_test_support::meshgen::{Mesh, MeshSpec};
use std::collections::BTreeMap;

pub const CLUSTER: &str = "Kubernetes";

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

/// The mesh and the PushContext of its first snapshot.
pub fn push_context(spec: &MeshSpec) -> (Mesh, PushContext) {
    let mesh = Mesh::generate(spec);
    let mut replica = Replica::new();
    let mut revision = 0;
    for (path, text) in &mesh.files {
        for parsed in parse_documents(&path.to_string_lossy(), text) {
            let mut c = parsed.expect("meshgen YAML parses").config;
            c.meta.cluster = CLUSTER.into();
            revision += 1;
            replica
                .apply(KvEntry {
                    key: config_kv_key(CLUSTER, &c.key()),
                    value: Some(encode_config(&c).expect("encodes").into()),
                    revision,
                })
                .expect("applies");
        }
    }
    let dirty = replica.take_dirty();
    let built = SnapshotBuilder::new()
        .build(&replica, dirty, revision, 0)
        .expect("builds")
        .expect("a first snapshot");
    let chunks = built
        .new_chunks
        .iter()
        .map(|(hash, bytes)| Chunk::decode(hash, bytes).expect("decodes"));
    (mesh, PushContext::from_chunks(revision, chunks))
}

/// Proxy `i` of a fleet spread evenly over the mesh's namespaces, as a pod of one of the
/// namespace's services (`app: svc-<n>`).
pub fn proxy(mesh: &Mesh, i: usize) -> Proxy {
    let namespaces = mesh.spec.namespaces.max(1);
    let svc = &mesh.services[i % mesh.services.len()];
    debug_assert_eq!(svc.namespace, format!("ns-{}", i % namespaces));
    let ip = format!("10.200.{}.{}", (i >> 8) & 0xff, i & 0xff);
    let workload = format!("{}-{i}.{}", svc.name, svc.namespace);
    Proxy {
        id: format!(
            "sidecar~{ip}~{workload}~{}.svc.cluster.local",
            svc.namespace
        ),
        proxy_type: ProxyType::Sidecar,
        ip,
        workload,
        namespace: svc.namespace.clone(),
        labels: BTreeMap::from([
            ("app".to_string(), svc.name.clone()),
            ("version".to_string(), "v1".to_string()),
        ]),
        interception: InterceptionMode::Redirect,
        cluster_id: CLUSTER.into(),
    }
}
