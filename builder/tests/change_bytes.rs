//! What a one-endpoint change costs the snapshot store, on synthetic meshes of 1k, 10k
//! and 100k services (meshgen: 10 endpoints each, 10 namespaces; no VirtualServices or
//! DestinationRules, which do not change what this measures and would triple the objects
//! a debug build has to parse).
//!
//! The change writes the service's endpoints chunk, the leaf page that lists it (~64 refs
//! at most on average), the index page above it at each level (at most 64 page refs;
//! none up to 4,096 chunks, one level up to 262,144) and the root manifest (at most 64
//! page refs): under 16 KiB in all at each size, for a typical service and for the one
//! whose pages are the largest (the worst case), where a manifest listing every chunk
//! was 709 KB at 10k services and a root listing every leaf page ~70 KB at 100k.
//! `edge/src/snapshot/tests.rs` measures the same change from the edge's side (what one
//! edge fetches).
//!
//! ```sh
//! cargo test -p shoal-builder --test change_bytes -- --nocapture
//! ```

#[path = "../benches/support/mod.rs"]
mod support;

use shoal_builder::snapshot::SnapshotBuilder;
use shoal_proto::model::ServiceKey;
use shoal_proto::snapshot::{ChunkKey, page_count};
use shoal_test_support::meshgen::{MeshSpec, ServiceInfo};
use support::{MeshKv, apply_and_build, full_build, spec, written_bytes};

/// The bound of issue 6, for everything one endpoint change writes.
const BOUND: usize = 16 * 1024;

fn endpoints_key(svc: &ServiceInfo) -> ChunkKey {
    ChunkKey::Endpoints(ServiceKey {
        hostname: svc.hostname.clone(),
        namespace: svc.namespace.clone(),
    })
}

/// The bytes of the pages a change of `svc`'s endpoints rewrites.
fn path_bytes(builder: &SnapshotBuilder, svc: &ServiceInfo) -> usize {
    let path = builder.pages().path(&endpoints_key(svc));
    path.iter().map(|(_, b)| b.len()).sum()
}

fn one_endpoint_change(services: usize) {
    let mut kv = MeshKv::generate(&MeshSpec {
        vs_fraction: 0.0,
        dr_fraction: 0.0,
        ..spec(services, 10)
    });
    let mut replica = kv.replica();
    let (mut builder, _) = full_build(&replica);
    let chunks = builder.chunk_count();
    assert_eq!(
        chunks,
        services + 10,
        "one chunk per service and per namespace"
    );
    let (leaves, depth) = (builder.pages().page_count(), builder.pages().depth());
    assert_eq!(leaves, page_count(chunks));
    // The worst case: the service whose leaf and index pages are the largest.
    let worst = kv
        .mesh
        .services
        .iter()
        .max_by_key(|svc| path_bytes(&builder, svc))
        .expect("services")
        .clone();
    let typical = kv.mesh.services[1].clone();
    for (case, svc) in [("typical", typical), ("worst", worst)] {
        let change = kv.endpoint_change(&svc, "10.250.0.1");
        let built = apply_and_build(&mut replica, &mut builder, change).expect("a new snapshot");
        let written = written_bytes(&built);
        let root_refs = built.manifest.pages.len();
        let pages: Vec<usize> = built.new_pages.iter().map(|(_, b)| b.len()).collect();
        eprintln!(
            "one endpoint change at {services} services, {case} ({chunks} chunks, {leaves} \
             leaf pages, {depth} index level(s), root of {root_refs} refs): endpoints chunk \
             {} B + pages {pages:?} B + root {} B = {} B in {} objects",
            written.chunks,
            written.manifest,
            written.total(),
            built.new_chunks.len() + built.new_pages.len() + 1
        );
        assert!(!built.full, "an endpoint change is not a full push");
        assert_eq!(
            built.new_chunks.len(),
            1,
            "only the service's endpoints chunk"
        );
        assert_eq!(
            built.new_pages.len(),
            usize::from(depth) + 1,
            "its leaf page and the index page above it at each level"
        );
        assert!(root_refs <= 64, "a root of {root_refs} refs");
        assert!(
            written.chunks < 1024,
            "endpoint chunk of {} B",
            written.chunks
        );
        assert!(
            written.total() < BOUND,
            "{case}: {} B written for one endpoint change",
            written.total()
        );
    }
}

#[test]
fn one_endpoint_change_writes_under_16_kib_at_1k_services() {
    one_endpoint_change(1_000);
}

#[test]
fn one_endpoint_change_writes_under_16_kib_at_10k_services() {
    one_endpoint_change(10_000);
}

#[test]
fn one_endpoint_change_writes_under_16_kib_at_100k_services() {
    one_endpoint_change(100_000);
}
