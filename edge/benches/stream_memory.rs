//! What the edge keeps per ADS stream, SotW against Delta, without the network: the
//! resident memory that 10k in-process streams add once each is through its initial sync
//! (CDS, EDS, LDS, RDS requested and ACKed), the generator's shared resources being warm
//! before (they exist once per scope, whatever the number of streams). Each protocol is
//! measured in a process of its own: the second of two batches in one process shows ~3 KiB
//! more per stream, whichever it is.
//!
//! ```sh
//! cargo bench -p shoal-edge --bench stream_memory            # Linux: reads /proc/self/statm
//! ```
//!
//! The mesh is that of `xds.rs`: 1k services × 10 endpoints in 10 namespaces, each with a
//! Sidecar narrowing egress to its namespace (~150 clusters per proxy).

mod support;

// The allocator the edge binary runs with.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use shoal_edge::ads::{DeltaStream, GeneratorSource, SotwStream};
use shoal_edge::proxy::Proxy;
use shoal_edge::xds::Generator;
use shoal_edge::xds::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE, is_wildcard};
use shoal_proto::push_context::PushContext;
use shoal_test_support::meshgen::Mesh;
use std::collections::HashMap;

const TYPES: [&str; 4] = [CLUSTER, ENDPOINT, LISTENER, ROUTE];
const STREAMS: usize = 10_000;

/// Resident memory of this process, in bytes.
fn rss() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Per namespace, the names each type subscribes to (none for CDS/LDS: wildcard).
struct Subscriptions<'a> {
    generator: &'a Generator,
    push: &'a PushContext,
    by_namespace: HashMap<String, Vec<Vec<String>>>,
}

impl Subscriptions<'_> {
    fn of(&mut self, proxy: &Proxy) -> &[Vec<String>] {
        let (g, push) = (self.generator, self.push);
        self.by_namespace
            .entry(proxy.namespace.clone())
            .or_insert_with(|| {
                TYPES
                    .iter()
                    .map(|t| {
                        if is_wildcard(t) {
                            return Vec::new();
                        }
                        let all = g.generate(t, proxy, push, &[]).expect("generates");
                        all.iter().map(|r| r.name.clone()).collect()
                    })
                    .collect()
            })
    }
}

fn sotw(src: &GeneratorSource<'_>, proxy: Proxy, subs: &[Vec<String>]) -> SotwStream {
    let mut stream = SotwStream::new(proxy);
    for (type_url, names) in TYPES.iter().zip(subs) {
        let mut req = DiscoveryRequest {
            type_url: type_url.to_string(),
            resource_names: names.clone(),
            ..Default::default()
        };
        let reply = stream.on_request(src, &req).expect("request");
        req.response_nonce = reply.responses[0].nonce.clone();
        req.version_info = reply.responses[0].version_info.clone();
        stream.on_request(src, &req).expect("ACK");
    }
    stream
}

fn delta(src: &GeneratorSource<'_>, proxy: Proxy, subs: &[Vec<String>]) -> DeltaStream {
    let mut stream = DeltaStream::new(proxy);
    for (type_url, names) in TYPES.iter().zip(subs) {
        let req = DeltaDiscoveryRequest {
            type_url: type_url.to_string(),
            resource_names_subscribe: names.clone(),
            ..Default::default()
        };
        let reply = stream.on_request(src, &req).expect("request");
        let ack = DeltaDiscoveryRequest {
            type_url: type_url.to_string(),
            response_nonce: reply.responses[0].nonce.clone(),
            ..Default::default()
        };
        stream.on_request(src, &ack).expect("ACK");
    }
    stream
}

/// Connects `STREAMS` streams with `connect`, keeps them, and reports what they added.
fn measure<T>(name: &str, mesh: &Mesh, mut connect: impl FnMut(Proxy) -> T) -> Vec<T> {
    let before = rss();
    let streams: Vec<T> = (0..STREAMS)
        .map(|i| connect(support::proxy(mesh, i)))
        .collect();
    let added = rss().saturating_sub(before);
    println!(
        "{name}: {STREAMS} streams added {:.1} MiB resident: {:.2} KiB per stream",
        added as f64 / (1 << 20) as f64,
        added as f64 / STREAMS as f64 / 1024.0
    );
    streams
}

/// Which protocol a child process measures.
const PROTOCOL_ENV: &str = "SHOAL_STREAM_MEMORY_PROTOCOL";

fn main() {
    // `cargo bench` passes `--bench`; a filter that is not ours skips the run.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"stream_memory".contains(a.as_str()))
    {
        return;
    }
    let Ok(protocol) = std::env::var(PROTOCOL_ENV) else {
        let exe = std::env::current_exe().expect("own path");
        for protocol in ["sotw", "delta"] {
            let status = std::process::Command::new(&exe)
                .env(PROTOCOL_ENV, protocol)
                .status()
                .expect("runs");
            assert!(status.success(), "{protocol}: {status}");
        }
        return;
    };
    let (mesh, push) = support::push_context(&support::spec(1_000, true));
    let generator = Generator::new();
    let src = GeneratorSource {
        generator: &generator,
        push: &push,
    };
    let mut subs = Subscriptions {
        generator: &generator,
        push: &push,
        by_namespace: HashMap::new(),
    };
    // Warm: every scope's resources generated and cached, the subscriptions computed.
    for i in 0..mesh.spec.namespaces {
        let proxy = support::proxy(&mesh, i);
        let s = subs.of(&proxy).to_vec();
        drop(delta(&src, proxy.clone(), &s));
        drop(sotw(&src, proxy, &s));
    }
    if protocol == "sotw" {
        drop(measure("sotw", &mesh, |p| {
            let s = subs.of(&p).to_vec();
            sotw(&src, p, &s)
        }));
    } else {
        drop(measure("delta", &mesh, |p| {
            let s = subs.of(&p).to_vec();
            delta(&src, p, &s)
        }));
    }
}
