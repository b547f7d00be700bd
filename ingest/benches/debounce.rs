//! Merge and debounce benchmarks.
//!
//! ```sh
//! cargo bench -p shoal-ingest --bench debounce -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! - `merge/*`: folding N `PushRequest`s with `PushRequest::merge` (Istio's
//!   `PushRequest.Merge`), with N distinct `configs_updated` keys (the set grows), one
//!   key repeated, and "everything" (empty `configs_updated`).
//! - `debounce/*`: N events through the real debouncer (`debounce::debounce`) on a
//!   current-thread tokio runtime, from a bounded channel as ingest feeds it, with a quiet
//!   period long enough that all N merge into the one push made when the input closes.
//!   Criterion's throughput line is the events per second one debouncer absorbs.

// The allocator the binaries run with.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use shoal_ingest::debounce::{DebounceConfig, debounce};
use shoal_proto::change::TriggerReason;
use shoal_proto::config::{ConfigKey, Kind};
use shoal_proto::push::PushRequest;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;

const SIZES: [usize; 2] = [100, 10_000];

/// `n` requests: each for its own VirtualService (`distinct`), all for one, or all full
/// pushes of everything.
fn requests(n: usize, keys: Keys) -> Vec<PushRequest> {
    let now = SystemTime::now();
    (0..n)
        .map(|i| match keys {
            Keys::Distinct => PushRequest::for_change(
                ConfigKey::new(Kind::VirtualService, "ns-1", format!("svc-{i}")),
                i as u64,
                now,
            ),
            Keys::Same => PushRequest::for_change(
                ConfigKey::new(Kind::EndpointSlice, "ns-1", "svc-1-1"),
                i as u64,
                now,
            ),
            Keys::Everything => {
                PushRequest::full_everything(TriggerReason::GlobalUpdate, i as u64, now)
            }
        })
        .collect()
}

#[derive(Clone, Copy)]
enum Keys {
    Distinct,
    Same,
    Everything,
}

const CASES: [(&str, Keys); 3] = [
    ("distinct_keys", Keys::Distinct),
    ("same_key", Keys::Same),
    ("everything", Keys::Everything),
];

fn merge(c: &mut Criterion) {
    let mut g = c.benchmark_group("merge");
    for n in SIZES {
        g.throughput(Throughput::Elements(n as u64));
        for (name, keys) in CASES {
            g.bench_function(format!("{name}/{n}"), |b| {
                b.iter_batched(
                    || requests(n, keys),
                    |reqs| reqs.into_iter().reduce(PushRequest::merge),
                    BatchSize::LargeInput,
                )
            });
        }
    }
    g.finish();
}

fn debouncer(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let config = DebounceConfig {
        after: Duration::from_secs(3600),
        max: Duration::from_secs(3600),
        eds: true,
    };
    let mut g = c.benchmark_group("debounce");
    for n in SIZES {
        g.throughput(Throughput::Elements(n as u64));
        for (name, keys) in CASES {
            g.bench_function(format!("{name}/{n}"), |b| {
                b.iter_batched(
                    || requests(n, keys),
                    |reqs| {
                        rt.block_on(async {
                            let pushed = Arc::new(AtomicUsize::new(0));
                            let (tx, rx) = mpsc::channel(1024);
                            let counter = pushed.clone();
                            let task = tokio::spawn(debounce(rx, config, move |req| {
                                counter.fetch_add(req.changes.events() as usize, Ordering::Relaxed);
                                async {}
                            }));
                            for r in reqs {
                                tx.send(r).await.expect("debouncer runs");
                            }
                            drop(tx);
                            task.await.expect("debouncer ends");
                            assert_eq!(pushed.load(Ordering::Relaxed), n, "every event pushed");
                        })
                    },
                    BatchSize::LargeInput,
                )
            });
        }
    }
    g.finish();
}

criterion_group!(benches, merge, debouncer);
criterion_main!(benches);
