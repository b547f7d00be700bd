//! What a one-endpoint change costs the snapshot store, on synthetic meshes of 1k and 10k
//! services (meshgen: 10 endpoints each, 10 namespaces; no VirtualServices or
//! DestinationRules, which do not change what this measures and would triple the objects
//! a debug build has to parse).
//!
//! The change writes the service's endpoints chunk, the one page that lists it (~64 refs
//! at most on average, `shoal_proto::snapshot::page`) and the root manifest (one entry per
//! page): under 16 KiB in all at 10k services, where a manifest listing every chunk was
//! 709 KB. `edge/src/snapshot/tests.rs` measures the same change from the edge's side
//! (what one edge fetches).
//!
//! ```sh
//! cargo test -p shoal-builder --test change_bytes -- --nocapture
//! ```

#[path = "../benches/support/mod.rs"]
mod support;

use shoal_proto::snapshot::{Page, page_count};
use shoal_test_support::meshgen::MeshSpec;
use support::{MeshKv, apply_and_build, full_build, spec, written_bytes};

/// The bound of issue 6 at 10k services, for everything one endpoint change writes.
const BOUND: usize = 16 * 1024;

fn one_endpoint_change(services: usize) {
    let mut kv = MeshKv::generate(&MeshSpec {
        vs_fraction: 0.0,
        dr_fraction: 0.0,
        ..spec(services, 10)
    });
    let mut replica = kv.replica();
    let (mut builder, first) = full_build(&replica);
    let chunks = builder.chunk_count();
    // Whichever service changes, its page is at most the largest.
    let largest_page = first.new_pages.iter().map(|(_, b)| b.len()).max();
    let largest_page = largest_page.expect("pages");
    assert_eq!(
        chunks,
        services + 10,
        "one chunk per service and per namespace"
    );
    let svc = kv.mesh.services[1].clone();
    let change = kv.endpoint_change(&svc, "10.250.0.1");
    let built = apply_and_build(&mut replica, &mut builder, change).expect("a new snapshot");
    let written = written_bytes(&built);
    let pages = built.manifest.pages.len();
    let (page_hash, page_bytes) = &built.new_pages[0];
    let refs = Page::decode(page_hash, page_bytes)
        .expect("page decodes")
        .chunks
        .len();
    eprintln!(
        "one endpoint change at {services} services ({chunks} chunks, {pages} pages): \
         endpoints chunk {} B + page {} B ({refs} refs) + manifest {} B = {} B \
         (largest page {largest_page} B)",
        written.chunks,
        written.pages,
        written.manifest,
        written.total()
    );
    assert!(!built.full, "an endpoint change is not a full push");
    assert_eq!(
        built.new_chunks.len(),
        1,
        "only the service's endpoints chunk"
    );
    assert_eq!(built.new_pages.len(), 1, "only the page that lists it");
    assert_eq!(pages as u32, page_count(chunks), "no page is empty");
    assert!(
        written.chunks < 1024,
        "endpoint chunk of {} B",
        written.chunks
    );
    assert!(
        written.total() < BOUND,
        "{} B written for one endpoint change",
        written.total()
    );
    let worst = written.chunks + largest_page + written.manifest;
    assert!(worst < BOUND, "{worst} B for a change on the largest page");
}

#[test]
fn one_endpoint_change_writes_under_16_kib_at_1k_services() {
    one_endpoint_change(1_000);
}

#[test]
fn one_endpoint_change_writes_under_16_kib_at_10k_services() {
    one_endpoint_change(10_000);
}
