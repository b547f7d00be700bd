//! Builder benchmarks: full build, incremental updates, snapshot encode/decode (chunks,
//! pages and the root manifest), and the bytes a one-endpoint change writes.
//!
//! ```sh
//! cargo bench -p shoal-builder --bench build -- --warm-up-time 1 --measurement-time 3
//! cargo bench -p shoal-builder --bench build -- incremental     # one group
//! ```
//!
//! Meshes: meshgen's defaults (10 endpoints per service, half the services with a
//! VirtualService, half with a DestinationRule and label-selected Pods, a Sidecar per
//! namespace) at 1k services / 10 namespaces and 10k services / 10 namespaces (1,000
//! services per namespace: the incremental cases rebuild one such namespace).

mod support;

// The allocator the binaries run with.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use shoal_builder::replica::Replica;
use shoal_builder::snapshot::SnapshotBuilder;
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::{Chunk, ChunkHash, Manifest, Pages};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{MeshKv, apply_and_build, full_build, spec, written_bytes};

const SIZES: [(usize, usize, &str); 2] = [(1_000, 10, "1k_svc"), (10_000, 10, "10k_svc")];

struct Fixture {
    name: &'static str,
    kv: MeshKv,
    replica: Replica,
    builder: SnapshotBuilder,
    chunks: Vec<(ChunkHash, Arc<Vec<u8>>)>,
    pages: Vec<(ChunkHash, Arc<Vec<u8>>)>,
    manifest: Manifest,
}

fn fixture(services: usize, namespaces: usize, name: &'static str) -> Fixture {
    let mut kv = MeshKv::generate(&spec(services, namespaces));
    let replica = kv.replica();
    let (builder, built) = full_build(&replica);
    Fixture {
        name,
        kv,
        replica,
        builder,
        chunks: built.new_chunks,
        pages: built.new_pages,
        manifest: built.manifest,
    }
}

fn full(c: &mut Criterion, f: &mut Fixture) {
    let mut g = c.benchmark_group("full_build");
    g.sample_size(10);
    // KV entries → replica (JSON decode of every object).
    let entries = f.kv.initial_entries();
    g.bench_function(format!("{}/replica_load", f.name), |b| {
        b.iter_batched(
            || entries.clone(),
            |entries| {
                let mut r = Replica::new();
                for e in entries {
                    r.apply(e).unwrap();
                }
                r
            },
            BatchSize::LargeInput,
        )
    });
    // Replica → every chunk encoded and hashed, the pages and the manifest.
    g.bench_function(format!("{}/snapshot_build", f.name), |b| {
        b.iter(|| full_build(black_box(&f.replica)))
    });
    // Chunks → PushContext (what an edge does on start).
    let decoded: Vec<Chunk> = f
        .chunks
        .iter()
        .map(|(h, b)| Chunk::decode(h, b).unwrap())
        .collect();
    g.bench_function(format!("{}/push_context_from_chunks", f.name), |b| {
        b.iter_batched(
            || decoded.clone(),
            |chunks| PushContext::from_chunks(1, chunks),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn incremental(c: &mut Criterion, f: &mut Fixture) {
    let mut g = c.benchmark_group("incremental");
    g.sample_size(20);
    let vs_svc = f.kv.mesh.first_with_vs().unwrap().clone();
    let ep_svc = f.kv.mesh.services[1].clone();
    // Each iteration is a real change: alternate between two values.
    let mut flip = false;
    g.bench_function(format!("{}/one_virtual_service", f.name), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                flip = !flip;
                let entries = f.kv.vs_change(&vs_svc, if flip { "7s" } else { "5s" });
                assert_eq!(entries.len(), 1);
                let start = Instant::now();
                let built = apply_and_build(&mut f.replica, &mut f.builder, entries);
                total += start.elapsed();
                assert!(built.unwrap().full);
            }
            total
        })
    });
    g.bench_function(format!("{}/one_endpoint", f.name), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                flip = !flip;
                let addr = if flip { "10.250.0.1" } else { "10.250.0.2" };
                let entries = f.kv.endpoint_change(&ep_svc, addr);
                let start = Instant::now();
                let built = apply_and_build(&mut f.replica, &mut f.builder, entries);
                total += start.elapsed();
                assert!(!built.unwrap().new_chunks.is_empty());
            }
            total
        })
    });
    g.finish();

    // What one endpoint change writes (a bench cannot assert: printed once).
    let built = apply_and_build(
        &mut f.replica,
        &mut f.builder,
        f.kv.endpoint_change(&ep_svc, "10.250.0.3"),
    )
    .unwrap();
    let written = written_bytes(&built);
    eprintln!(
        "{}: one endpoint change writes {} chunk(s) of {} B + {} page(s) of {} B + a manifest of {} B ({} page refs, depth {}) = {} B",
        f.name,
        built.new_chunks.len(),
        written.chunks,
        built.new_pages.len(),
        written.pages,
        written.manifest,
        built.manifest.pages.len(),
        built.manifest.depth,
        written.total()
    );
}

fn codec(c: &mut Criterion, f: &mut Fixture) {
    let mut g = c.benchmark_group("snapshot_codec");
    g.sample_size(10);
    let decoded: Vec<Chunk> = f
        .chunks
        .iter()
        .map(|(h, b)| Chunk::decode(h, b).unwrap())
        .collect();
    let bytes: usize = f.chunks.iter().map(|(_, b)| b.len()).sum();
    let page_bytes: usize = f.pages.iter().map(|(_, b)| b.len()).sum();
    eprintln!(
        "{}: {} chunks, {bytes} B; {} pages, {page_bytes} B; manifest {} B",
        f.name,
        f.chunks.len(),
        f.pages.len(),
        f.manifest.encode().unwrap().len()
    );
    g.bench_function(format!("{}/encode_all_chunks", f.name), |b| {
        b.iter(|| {
            for c in &decoded {
                black_box(c.encode().unwrap());
            }
        })
    });
    g.bench_function(format!("{}/decode_all_chunks", f.name), |b| {
        b.iter(|| {
            for (h, bytes) in &f.chunks {
                black_box(Chunk::decode(h, bytes).unwrap());
            }
        })
    });
    // Every chunk ref paged, every page encoded: what pages add to a full build.
    let refs = f.builder.chunk_refs();
    g.bench_function(format!("{}/all_pages", f.name), |b| {
        b.iter(|| black_box(Pages::of(refs.iter().cloned()).unwrap()))
    });
    let manifest_bytes = f.manifest.encode().unwrap();
    g.bench_function(format!("{}/encode_manifest", f.name), |b| {
        b.iter(|| black_box(f.manifest.encode().unwrap()))
    });
    g.bench_function(format!("{}/decode_manifest", f.name), |b| {
        b.iter(|| black_box(Manifest::decode(&manifest_bytes).unwrap()))
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    for (services, namespaces, name) in SIZES {
        let mut f = fixture(services, namespaces, name);
        full(c, &mut f);
        incremental(c, &mut f);
        codec(c, &mut f);
    }
}

criterion_group!(build, benches);
criterion_main!(build);
