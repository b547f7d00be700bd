//! The content hash of the loadtest's cache of verified responses
//! (`client::verified`): XXH3-128 against BLAKE3, per byte, on the shapes a proxy
//! receives — a state-of-the-world EDS response (1,000 bodies of ~250 bytes, hashed
//! body by body with their lengths) and one large RouteConfiguration (~55 KB).
//!
//! ```sh
//! cargo bench -p shoal-loadtest --bench hash -- --warm-up-time 1 --measurement-time 3
//! ```

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

fn bodies(n: usize, len: usize) -> Vec<Vec<u8>> {
    // Deterministic, not compressible into a pattern the hash could shortcut.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        })
        .collect()
}

fn xxh3(bodies: &[Vec<u8>]) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for b in bodies {
        h.update(&(b.len() as u64).to_le_bytes());
        h.update(b);
    }
    h.digest128()
}

fn blake3(bodies: &[Vec<u8>]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    for b in bodies {
        h.update(&(b.len() as u64).to_le_bytes());
        h.update(b);
    }
    *h.finalize().as_bytes()
}

fn hashes(c: &mut Criterion) {
    for (name, shape) in [
        ("eds_1000x250", bodies(1000, 250)),
        ("rds_55k", bodies(1, 55_000)),
    ] {
        let bytes: usize = shape.iter().map(Vec::len).sum();
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Bytes(bytes as u64));
        g.bench_function("xxh3_128", |b| b.iter(|| xxh3(black_box(&shape))));
        g.bench_function("blake3", |b| b.iter(|| blake3(black_box(&shape))));
        g.finish();
    }
}

criterion_group!(benches, hashes);
criterion_main!(benches);
