use super::*;
use shoal_proto::config::parse::parse_documents;
use shoal_proto::transport::{KvEntry, config_kv_key, encode_config};

fn entries(yaml: &str, first_revision: u64) -> Vec<KvEntry> {
    parse_documents("t.yaml", yaml)
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let mut c = r.unwrap().config;
            c.meta.cluster = "c1".into();
            KvEntry {
                key: config_kv_key("c1", &c.key()),
                value: Some(encode_config(&c).unwrap().into()),
                revision: first_revision + i as u64,
            }
        })
        .collect()
}

const MESH: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: a, namespace: ns1}
spec: {selector: {app: a}, ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Pod
metadata: {name: a-1, namespace: ns1, labels: {app: a}}
status: {podIP: 10.0.0.1}
---
apiVersion: v1
kind: Service
metadata: {name: b, namespace: ns2}
spec: {selector: {app: b}, ports: [{name: http, port: 80}]}
"#;

#[test]
fn first_build_is_full_then_endpoint_change_is_incremental() {
    let mut replica = Replica::new();
    for e in entries(MESH, 1) {
        replica.apply(e).unwrap();
    }
    let mut builder = SnapshotBuilder::new();
    let first = {
        let dirty = replica.take_dirty();
        builder.build(&replica, dirty, replica.revision(), 0)
    }
    .unwrap()
    .unwrap();
    assert!(first.full);
    assert_eq!(first.manifest.version, 3);
    // 2 namespace chunks + 2 endpoint chunks.
    assert_eq!(first.manifest.chunks.len(), 4);
    assert_eq!(first.new_chunks.len(), 4);

    // Move pod a-1: only ns1's endpoints chunk changes.
    let moved = MESH.replace("10.0.0.1", "10.0.0.9");
    let pod = entries(&moved, 10).remove(1);
    replica.apply(pod).unwrap();
    let dirty = replica.take_dirty();
    assert_eq!(dirty.namespaces.iter().collect::<Vec<_>>(), ["ns1"]);
    let next = builder
        .build(&replica, dirty, replica.revision(), 0)
        .unwrap()
        .unwrap();
    assert!(!next.full);
    assert_eq!(next.new_chunks.len(), 1);
    assert_eq!(
        next.services_updated
            .iter()
            .map(|k| k.name.as_str())
            .collect::<Vec<_>>(),
        ["a.ns1.svc.cluster.local"]
    );

    // Nothing changed: no snapshot.
    let dirty = replica.take_dirty();
    assert!(builder.build(&replica, dirty, 11, 0).unwrap().is_none());
}

#[test]
fn replays_are_ignored_and_deletes_remove_chunks() {
    let mut replica = Replica::new();
    let es = entries(MESH, 1);
    for e in es.clone() {
        replica.apply(e).unwrap();
    }
    assert!(
        !replica.apply(es[0].clone()).unwrap(),
        "replay must be ignored"
    );
    let mut builder = SnapshotBuilder::new();
    let dirty = replica.take_dirty();
    builder.build(&replica, dirty, 3, 0).unwrap();
    replica
        .apply(KvEntry {
            key: es[2].key.clone(),
            value: None,
            revision: 4,
        })
        .unwrap();
    let dirty = replica.take_dirty();
    let next = builder.build(&replica, dirty, 4, 0).unwrap().unwrap();
    assert!(next.full);
    assert_eq!(next.manifest.chunks.len(), 2);
    assert!(
        next.services_updated
            .iter()
            .any(|k| k.name == "b.ns2.svc.cluster.local")
    );
}

#[test]
fn dns_service_endpoint_change_is_full() {
    let se = |addr: &str| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: ext, namespace: ns1}}\nspec:\n  hosts: [ext.example.com]\n  resolution: DNS\n  ports: [{{number: 80, name: http, protocol: HTTP}}]\n  endpoints: [{{address: {addr}}}]\n"
        )
    };
    let mut replica = Replica::new();
    for e in entries(&se("a.example.com"), 1) {
        replica.apply(e).unwrap();
    }
    let mut builder = SnapshotBuilder::new();
    let dirty = replica.take_dirty();
    builder.build(&replica, dirty, 1, 0).unwrap();
    for e in entries(&se("b.example.com"), 2) {
        replica.apply(e).unwrap();
    }
    let dirty = replica.take_dirty();
    let next = builder.build(&replica, dirty, 2, 0).unwrap().unwrap();
    assert!(next.full, "a DNS cluster inlines its endpoints: CDS must be pushed");
}
