//! The ring's lookup alone: which of 8 edges owns each of an edge's share of a million
//! proxies (125,000 IDs, as the loadtest names them). Every ring change, and every
//! `--rehome-interval`, looks up each proxy an edge serves and each it relays.
//!
//! ```sh
//! cargo bench -p shoal-edge --bench ring -- --warm-up-time 1 --measurement-time 5
//! ```

use criterion::{Criterion, criterion_group, criterion_main};
use shoal_edge::membership::Ring;
use shoal_proto::transport::Member;
use std::hint::black_box;

const PROXIES: usize = 125_000;

fn ring(edges: usize) -> Ring {
    Ring::new(
        (0..edges)
            .map(|i| Member {
                // As a Deployment names its pods.
                id: format!("shoal-edge-7d9c8b5f4-{i:05}"),
                xds_addr: format!("10.8.0.{i}:15010"),
            })
            .collect(),
    )
}

/// The loadtest's proxy IDs: `sidecar~<ip>~proxy-<n>.ns-<n mod 100>~ns-<..>.svc.cluster.local`.
fn proxies() -> Vec<String> {
    (0..PROXIES)
        .map(|p| {
            let ns = p % 100;
            format!(
                "sidecar~100.{}.{}.{}~proxy-{p}.ns-{ns}~ns-{ns}.svc.cluster.local",
                64 + p / 65_536,
                p / 256 % 256,
                p % 256
            )
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let ids = proxies();
    let ring = ring(8);
    let me = ring.members()[0].id.clone();
    c.bench_function("ring/owns: 125,000 proxies, 8 edges", |b| {
        b.iter(|| ids.iter().filter(|p| ring.owns(&me, black_box(p))).count())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
