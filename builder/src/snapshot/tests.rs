use super::*;
use shoal_proto::config::Origin;
use shoal_proto::config::parse::parse_documents;
use shoal_proto::snapshot::{Page, PageRef};
use shoal_proto::transport::{KvEntry, config_kv_key, encode_config};

fn entries(yaml: &str, first_revision: u64) -> Vec<KvEntry> {
    parse_documents("t.yaml", yaml)
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let mut c = r.unwrap().config;
            c.meta.origin = Origin::new("c1", "dir", "");
            KvEntry {
                key: config_kv_key(&c.meta.origin, &c.key()),
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
    // 2 namespace chunks + 2 endpoint chunks, on one page.
    assert_eq!(builder.chunk_refs().len(), 4);
    assert_eq!(first.new_chunks.len(), 4);
    assert_eq!(first.manifest.pages.len(), 1);
    assert_eq!(first.new_pages.len(), 1);

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
    assert_eq!(next.new_pages.len(), 1, "the page listing it");
    assert_ne!(next.manifest.pages, first.manifest.pages);
    assert_eq!(service_hosts(&next), ["a.ns1.svc.cluster.local"]);

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
    assert_eq!(builder.chunk_refs().len(), 2);
    assert!(service_hosts(&next).contains(&"b.ns2.svc.cluster.local"));
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
    assert!(
        next.full,
        "a DNS cluster inlines its endpoints: CDS must be pushed"
    );
}

const RICH: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: a, namespace: ns1}
spec: {selector: {app: a}, ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: a-1, namespace: ns1, labels: {kubernetes.io/service-name: a}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- addresses: [10.0.0.1]
  targetRef: {kind: Pod, name: a-1, namespace: ns1}
- addresses: [10.0.0.2]
  targetRef: {kind: Pod, name: a-2, namespace: ns1}
---
apiVersion: v1
kind: Pod
metadata: {name: a-1, namespace: ns1, labels: {app: a, version: v1}}
status: {podIP: 10.0.0.1}
---
apiVersion: v1
kind: Pod
metadata: {name: a-2, namespace: ns1, labels: {app: a, version: v2}}
status: {podIP: 10.0.0.2}
---
apiVersion: v1
kind: Service
metadata: {name: b, namespace: ns1}
spec: {selector: {app: b}, ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b-1, namespace: ns1, labels: {app: b}}
status: {podIP: 10.0.1.1}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a, namespace: ns1}
spec:
  hosts: [a]
  http: [{route: [{destination: {host: a, subset: v1}}], timeout: 5s}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: a, namespace: ns1}
spec: {host: a, subsets: [{name: v1, labels: {version: v1}}]}
---
apiVersion: v1
kind: Service
metadata: {name: c, namespace: ns2}
spec: {selector: {app: c}, ports: [{name: http, port: 80}]}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: c-vm, namespace: ns2}
spec: {address: 10.0.2.1, labels: {app: c}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: ns2}
spec:
  hosts: [ext.example.com]
  resolution: DNS
  ports: [{number: 80, name: http, protocol: HTTP}]
  endpoints: [{address: a.example.com}]
"#;

/// Builds `replica` from scratch: the chunk refs and pages every incremental build must
/// equal.
fn from_scratch(replica: &Replica) -> (Vec<ChunkRef>, Vec<PageRef>) {
    let dirty = Dirty {
        all: true,
        ..Dirty::default()
    };
    let mut builder = SnapshotBuilder::new();
    let pages = builder
        .build(replica, dirty, replica.revision(), 0)
        .unwrap()
        .map(|b| b.manifest.pages)
        .unwrap_or_default();
    (builder.chunk_refs(), pages)
}

#[test]
fn incremental_builds_equal_a_build_from_scratch() {
    let mut replica = Replica::new();
    let mut rev = 0;
    let mut apply = |replica: &mut Replica, yaml: &str, delete: bool| {
        for mut e in entries(yaml, rev + 1) {
            rev += 1;
            e.revision = rev;
            if delete {
                e.value = None;
            }
            replica.apply(e).unwrap();
        }
    };
    apply(&mut replica, RICH, false);
    let mut builder = SnapshotBuilder::new();
    let dirty = replica.take_dirty();
    let pages = builder
        .build(&replica, dirty, replica.revision(), 0)
        .unwrap()
        .unwrap()
        .manifest
        .pages;
    let mut last = (builder.chunk_refs(), pages);
    assert_eq!(last, from_scratch(&replica));

    let doc = |i: usize| RICH.split("\n---\n").nth(i).unwrap().to_string();
    // (what, YAML, delete, expect full, expect the hostnames of the services changed)
    let steps: Vec<(&str, String, bool, bool, Vec<&str>)> = vec![
        (
            "VirtualService edit",
            doc(6).replace("5s", "7s"),
            false,
            true,
            vec![],
        ),
        (
            "Pod relabelled (endpoints only)",
            doc(2).replace("version: v1", "version: v2"),
            false,
            false,
            vec!["a.ns1.svc.cluster.local"],
        ),
        (
            "EndpointSlice address moved",
            doc(1).replace("10.0.0.2]", "10.0.0.9]"),
            false,
            false,
            vec!["a.ns1.svc.cluster.local"],
        ),
        ("DestinationRule deleted", doc(7), true, true, vec![]),
        (
            "WorkloadEntry moved",
            doc(9).replace("10.0.2.1", "10.0.2.2"),
            false,
            false,
            vec!["c.ns2.svc.cluster.local"],
        ),
        (
            "DNS ServiceEntry endpoints changed",
            doc(10).replace("a.example.com", "b.example.com"),
            false,
            true,
            vec!["ext.example.com"],
        ),
        (
            "Service port added",
            doc(4).replace(
                "[{name: http, port: 80}]",
                "[{name: http, port: 80}, {name: grpc, port: 90}]",
            ),
            false,
            true,
            // Only the redefined service: its neighbour is as it was.
            vec!["b.ns1.svc.cluster.local"],
        ),
        (
            "VirtualService and Pod together",
            format!(
                "{}\n---\n{}",
                doc(6).replace("5s", "9s"),
                doc(5).replace("10.0.1.1", "10.0.1.2")
            ),
            false,
            true,
            vec!["b.ns1.svc.cluster.local"],
        ),
        ("VirtualService deleted", doc(6), true, true, vec![]),
        (
            "Service and its Pods deleted",
            format!("{}\n---\n{}", doc(4), doc(5)),
            true,
            true,
            vec!["b.ns1.svc.cluster.local"],
        ),
    ];
    for (what, yaml, delete, want_full, want_updated) in steps {
        apply(&mut replica, &yaml, delete);
        let dirty = replica.take_dirty();
        let built = builder
            .build(&replica, dirty, replica.revision(), 0)
            .unwrap()
            .unwrap_or_else(|| panic!("{what}: no snapshot"));
        let now = (builder.chunk_refs(), built.manifest.pages.clone());
        assert_eq!(now, from_scratch(&replica), "{what}");
        assert_ne!(now.0, last.0, "{what}: nothing changed");
        assert_eq!(built.full, want_full, "{what}: full");
        assert_eq!(
            service_hosts(&built),
            want_updated,
            "{what}: services changed"
        );
        last = now;
    }
}

/// The hostnames of the services a build names as changed.
fn service_hosts(built: &Built) -> Vec<&str> {
    built
        .changed
        .iter()
        .filter(|k| matches!(k, ChangeKey::Service(_)))
        .filter_map(ChangeKey::hostname)
        .collect()
}

#[test]
fn routing_changes_are_named_by_hostname() {
    let mut replica = Replica::new();
    for e in entries(RICH, 1) {
        replica.apply(e).unwrap();
    }
    let mut builder = SnapshotBuilder::new();
    let dirty = replica.take_dirty();
    let first = builder.build(&replica, dirty, 1, 0).unwrap().unwrap();
    assert!(
        first.full && first.changed.is_empty(),
        "a first build is everything"
    );
    let vs = RICH.split("\n---\n").nth(6).unwrap().replace("5s", "7s");
    for e in entries(&vs, 100) {
        replica.apply(e).unwrap();
    }
    let dirty = replica.take_dirty();
    let built = builder.build(&replica, dirty, 100, 0).unwrap().unwrap();
    assert!(built.full);
    let hosts: Vec<&ChangeKey> = built.changed.iter().collect();
    assert!(
        !hosts.is_empty() && hosts.iter().all(|k| matches!(k, ChangeKey::Host(_))),
        "{hosts:?}"
    );
}

/// `n` services with one Pod each in namespace `ns`.
fn services(n: usize, ip_of_first: &str) -> String {
    (0..n)
        .map(|i| {
            let ip = if i == 0 {
                ip_of_first.to_string()
            } else {
                format!("10.1.{}.{}", i / 250, i % 250)
            };
            format!(
                "apiVersion: v1\nkind: Service\nmetadata: {{name: s{i}, namespace: ns}}\nspec: {{selector: {{app: s{i}}}, ports: [{{name: http, port: 80}}]}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: s{i}-0, namespace: ns, labels: {{app: s{i}}}}}\nstatus: {{podIP: {ip}}}\n"
            )
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

#[test]
fn an_endpoint_change_rewrites_one_page_and_pages_are_restored_and_refreshed() {
    let mut replica = Replica::new();
    for e in entries(&services(200, "10.0.0.1"), 1) {
        replica.apply(e).unwrap();
    }
    let mut builder = SnapshotBuilder::new();
    let dirty = replica.take_dirty();
    let first = builder.build(&replica, dirty, 1_000, 0).unwrap().unwrap();
    // 201 chunks: 4 pages of ~50 refs.
    assert_eq!(builder.chunk_count(), 201);
    assert_eq!(first.manifest.pages.len(), 4);
    assert_eq!(first.new_pages.len(), 4);

    let pod = entries(&services(200, "10.0.0.9"), 1_001).remove(1);
    replica.apply(pod).unwrap();
    let dirty = replica.take_dirty();
    let next = builder.build(&replica, dirty, 1_001, 0).unwrap().unwrap();
    assert!(!next.full);
    assert_eq!(next.new_chunks.len(), 1);
    assert_eq!(next.new_pages.len(), 1);
    let changed: Vec<&PageRef> = next
        .manifest
        .pages
        .iter()
        .filter(|p| !first.manifest.pages.contains(p))
        .collect();
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].hash, next.new_pages[0].0);
    let page = Page::decode(&next.new_pages[0].0, &next.new_pages[0].1).unwrap();
    assert!(page.chunks.iter().any(|r| r.hash == next.new_chunks[0].0));

    // Restoring and refreshing cover every chunk and every page of the snapshot.
    let hashes: BTreeSet<ChunkHash> = builder.hashes().into_iter().collect();
    let encoded: BTreeSet<ChunkHash> = builder.encoded().into_iter().map(|(h, _)| h).collect();
    assert_eq!(hashes, encoded);
    assert_eq!(hashes.len(), 201 + 4);
    for p in &next.manifest.pages {
        assert!(hashes.contains(&p.hash), "page {}", p.index);
    }
    for r in builder.chunk_refs() {
        assert!(hashes.contains(&r.hash), "chunk {:?}", r.key);
    }
}

#[test]
fn keys_of_the_format_before_sources_are_still_read() {
    let mut replica = Replica::new();
    for mut e in entries(MESH, 1) {
        // `<cluster>.<source>.<kind>.<ns>.<name>` → `<cluster>.<kind>.<ns>.<name>`
        let (cluster, rest) = e.key.split_once('.').unwrap();
        let (_source, rest) = rest.split_once('.').unwrap();
        e.key = format!("{cluster}.{rest}");
        assert!(replica.apply(e).unwrap());
    }
    assert_eq!(replica.len(), entries(MESH, 1).len());
}
