//! `shoal_test_support::fixtures` writes a meshgen mesh's snapshot chunks directly, so
//! that edge tests and benches need no builder. Here they are proven to be the chunks the
//! builder builds from the mesh's YAML, byte for byte (with the same pages, leaf and
//! index, and root manifest), and so the same PushContext.

#[path = "../benches/support/mod.rs"]
mod support;

use shoal_proto::model::ServiceKey;
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::{Chunk, ChunkHash, ChunkRef, Manifest};
use shoal_test_support::fixtures;
use shoal_test_support::meshgen::{Mesh, MeshSpec};
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use support::{MeshKv, full_build};

/// The first snapshot the builder builds of `spec`'s mesh, as the edge reads it: the
/// root manifest, its chunk refs and the decoded chunks, sorted by key.
fn built(spec: &MeshSpec) -> (Manifest, Vec<ChunkRef>, Vec<Chunk>) {
    let (manifest, refs, chunks, _) = built_with_pages(spec);
    (manifest, refs, chunks)
}

/// [`built`], and the hashes of every page (leaf and index) the build wrote.
fn built_with_pages(spec: &MeshSpec) -> (Manifest, Vec<ChunkRef>, Vec<Chunk>, Vec<ChunkHash>) {
    let replica = MeshKv::generate(spec).replica();
    let (builder, built) = full_build(&replica);
    let mut chunks: Vec<Chunk> = built
        .new_chunks
        .iter()
        .map(|(hash, bytes)| Chunk::decode(hash, bytes).expect("chunk decodes"))
        .collect();
    chunks.sort_by_key(Chunk::key);
    let pages = built.new_pages.iter().map(|(h, _)| *h).collect();
    (built.manifest, builder.chunk_refs(), chunks, pages)
}

fn specs() -> Vec<MeshSpec> {
    vec![
        // meshgen's defaults: half the services with a VirtualService, half with a
        // DestinationRule, a Sidecar in every namespace.
        MeshSpec::default(),
        // Every kind on every service, a few Sidecars, endpoint addresses whose text
        // order is not their numeric order.
        MeshSpec {
            services: 40,
            endpoints_per_service: 13,
            namespaces: 4,
            vs_fraction: 1.0,
            dr_fraction: 1.0,
            sidecar_fraction: 0.5,
            seed: 7,
        },
        // Enough services for a level of index pages (4,097+ chunks: 128 leaf pages
        // under 2 index pages).
        MeshSpec {
            services: 4_200,
            endpoints_per_service: 1,
            namespaces: 3,
            vs_fraction: 0.0,
            dr_fraction: 0.0,
            sidecar_fraction: 0.0,
            seed: 11,
        },
        // Routing-free services, and namespaces left without any config.
        MeshSpec {
            services: 3,
            endpoints_per_service: 2,
            namespaces: 6,
            vs_fraction: 0.0,
            dr_fraction: 0.0,
            sidecar_fraction: 0.0,
            seed: 3,
        },
    ]
}

#[test]
fn fixture_chunks_are_the_builders_byte_for_byte() {
    for spec in specs() {
        let (manifest, refs_built, built, pages_built) = built_with_pages(&spec);
        let fixture = fixtures::chunks(&Mesh::generate(&spec));
        assert_eq!(
            fixture.iter().map(Chunk::key).collect::<Vec<_>>(),
            built.iter().map(Chunk::key).collect::<Vec<_>>(),
            "{spec:?}: the same chunk keys"
        );
        for (ours, theirs) in fixture.iter().zip(&built) {
            assert_eq!(ours, theirs, "{spec:?}: chunk {:?}", ours.key());
        }
        let refs: Vec<ChunkRef> = fixture
            .iter()
            .map(|c| ChunkRef {
                key: c.key(),
                hash: c.encode().expect("chunk encodes").0,
            })
            .collect();
        assert_eq!(refs, refs_built, "{spec:?}: the same chunk refs");
        let (stored, blobs) = fixtures::stored(manifest.version, &fixture);
        assert_eq!(stored, manifest, "{spec:?}: the same root");
        let chunk_hashes: BTreeSet<&ChunkHash> = refs.iter().map(|r| &r.hash).collect();
        let pages: BTreeSet<&ChunkHash> = blobs
            .iter()
            .map(|(h, _)| h)
            .filter(|h| !chunk_hashes.contains(h))
            .collect();
        assert_eq!(
            pages,
            pages_built.iter().collect(),
            "{spec:?}: the same pages, leaf and index"
        );
    }
}

#[test]
fn fixture_push_context_is_the_edges_view_of_the_build() {
    let spec = MeshSpec::default();
    let (_, _, built) = built(&spec);
    let from_build = PushContext::from_chunks(fixtures::VERSION, built);
    let (mesh, fixture) = fixtures::push_context(&spec);
    assert_eq!(fixture.namespaces(), from_build.namespaces());
    for svc in &mesh.services {
        let key = ServiceKey {
            hostname: svc.hostname.clone(),
            namespace: svc.namespace.clone(),
        };
        assert!(fixture.endpoints(&key).is_some(), "{key} has endpoints");
        assert_eq!(fixture.endpoints(&key), from_build.endpoints(&key));
    }
    for ns in ["ns-0", "ns-1", "istio-system"] {
        let labels = BTreeMap::from([("app".to_string(), "svc-1".to_string())]);
        let (ours, theirs) = (
            fixture.sidecar_scope(ns, &labels),
            from_build.sidecar_scope(ns, &labels),
        );
        assert_eq!(ours.id, theirs.id);
        assert_eq!(ours.services, theirs.services, "{ns}: the same services");
        assert_eq!(ours.virtual_services, theirs.virtual_services);
    }
}
