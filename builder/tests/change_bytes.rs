//! What a one-endpoint change costs the snapshot store, on a synthetic mesh of 10k
//! services (meshgen: 10 endpoints each, 10 namespaces; no VirtualServices or
//! DestinationRules, which do not change what this measures and would triple the objects
//! a debug build has to parse): the chunk it writes stays small,
//! whatever the mesh size. The manifest that comes with it lists every chunk of the
//! snapshot (one per namespace and one per service), so it grows with the mesh and is
//! what dominates the bytes written; its bound here is per chunk it lists.

#[path = "../benches/support/mod.rs"]
mod support;

use shoal_test_support::meshgen::MeshSpec;
use support::{MeshKv, apply_and_build, full_build, spec, written_bytes};

#[test]
fn one_endpoint_change_writes_one_small_chunk_and_the_manifest() {
    let mut kv = MeshKv::generate(&MeshSpec {
        vs_fraction: 0.0,
        dr_fraction: 0.0,
        ..spec(10_000, 10)
    });
    let mut replica = kv.replica();
    let (mut builder, _) = full_build(&replica);
    let svc = kv.mesh.services[1].clone();
    let change = kv.endpoint_change(&svc, "10.250.0.1");
    let built = apply_and_build(&mut replica, &mut builder, change).expect("a new snapshot");
    let (chunks, manifest) = written_bytes(&built);
    let refs = built.manifest.chunks.len();
    eprintln!(
        "one endpoint change at 10k services: {} chunk(s), {chunks} B; manifest {manifest} B for {refs} chunks",
        built.new_chunks.len()
    );
    assert!(!built.full, "an endpoint change is not a full push");
    assert_eq!(
        built.new_chunks.len(),
        1,
        "only the service's endpoints chunk"
    );
    assert!(chunks < 64 * 1024, "endpoint chunk of {chunks} B");
    assert_eq!(refs, 10_000 + 10, "one chunk per service and per namespace");
    assert!(
        manifest < 80 * refs,
        "manifest of {manifest} B for {refs} chunks"
    );
}
