//! Edge benchmarks: xDS generation for one proxy (first and cached), a Delta proxy
//! reconnecting with everything current, and the fan-out of one change to 10k in-process
//! SotW streams.
//!
//! ```sh
//! cargo bench -p shoal-edge --bench xds -- --warm-up-time 1 --measurement-time 3
//! cargo bench -p shoal-edge --bench xds -- generate/    # one proxy only
//! cargo bench -p shoal-edge --bench xds -- reconnect/   # one Delta stream
//! cargo bench -p shoal-edge --bench xds -- fanout/      # 10k streams
//! cargo bench -p shoal-edge --bench xds -- config_dump/ # one proxy's dump and diff
//! ```
//!
//! The mesh: 1k services × 10 endpoints in 10 namespaces (meshgen defaults: half with a
//! VirtualService, half with a DestinationRule with two subsets), each namespace with a
//! Sidecar narrowing egress to `./*` (`sidecar`), or none (`no_sidecar`: every proxy
//! sees the whole mesh).
//!
//! The fan-out drives the public pieces the ADS server is made of: a `PushQueue` of
//! `PushEvent`s, one `SotwStream` per connection, a `GeneratorSource` over a shared
//! `Generator`. The dispatcher's decision (`ads::dispatch::needs_push`, crate-private) is
//! mirrored here with the public `SidecarScope` API, and what changed is named as the
//! snapshot puller names it (`change::namespace_changes`). Nothing is sent: what is
//! measured is the edge's CPU per change (decide, queue, generate, diff, build the
//! responses), for one endpoint change (EDS to the streams whose scope holds the
//! service), one VirtualService change (full push to the scopes holding its hosts) and
//! an un-narrowed full push (every stream). The initial sync of the 10k streams is
//! printed once.

mod support;

// The allocator the edge binary runs with.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use shoal_edge::ads::{DeltaStream, GeneratorSource, PushScope, SotwStream, proxy_needs_push};
use shoal_edge::convergence::{Ledger, Revisions};
use shoal_edge::proxy::Proxy;
use shoal_edge::push_queue::{PushEvent, PushQueue};
use shoal_edge::xds::Generator;
use shoal_proto::change::{ChangeKey, ChangeSet, TriggerReason, namespace_changes};
use shoal_proto::model::ServiceKey;
use shoal_proto::push_context::{ConfigIndex, PushContext, SidecarScope};
use shoal_proto::snapshot::Chunk;
use shoal_proto::xds::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE, is_wildcard};
use shoal_test_support::meshgen::Mesh;
use std::collections::{BTreeSet, HashMap};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

const TYPES: [(&str, &str); 4] = [
    ("cds", CLUSTER),
    ("eds", ENDPOINT),
    ("lds", LISTENER),
    ("rds", ROUTE),
];
const SERVICES: usize = 1_000;
const STREAMS: usize = 10_000;

/// The names a proxy subscribes to for `type_url`: none for CDS/LDS (wildcard), every
/// EDS cluster / route configuration its scope has for EDS/RDS (as Envoy asks for what
/// CDS and LDS reference).
fn subscription(g: &Generator, type_url: &str, proxy: &Proxy, push: &PushContext) -> Vec<String> {
    if is_wildcard(type_url) {
        return Vec::new();
    }
    g.generate(type_url, proxy, push, &[])
        .expect("generates")
        .iter()
        .map(|r| r.name.clone())
        .collect()
}

fn generate(c: &mut Criterion) {
    for sidecars in [true, false] {
        let variant = if sidecars { "sidecar" } else { "no_sidecar" };
        let (mesh, push) = support::push_context(&support::spec(SERVICES, sidecars));
        let proxy = support::proxy(&mesh, 0);
        let mut g = c.benchmark_group(format!("generate/{variant}"));
        g.sample_size(20);

        // The proxy's SidecarScope: computed once per index generation, then shared.
        g.bench_function("scope/first", |b| {
            b.iter_batched(
                || ConfigIndex::build(push.version(), push.namespaces()),
                |index| {
                    let scope = index.sidecar_scope(&proxy.namespace, &proxy.labels);
                    (index, scope)
                },
                BatchSize::LargeInput,
            )
        });
        g.bench_function("scope/cached", |b| {
            b.iter(|| push.sidecar_scope(&proxy.namespace, &proxy.labels))
        });

        let warm = Generator::new();
        for (short, type_url) in TYPES {
            let names = subscription(&warm, type_url, &proxy, &push);
            let out = warm.generate(type_url, &proxy, &push, &names).unwrap();
            let bytes: usize = out.iter().map(|r| r.resource.value.len()).sum();
            eprintln!(
                "{variant}: {short}: {} resources, {bytes} B encoded",
                out.len()
            );
            // First: a generator that has seen nothing for this scope (EDS after CDS, as
            // Envoy asks; EDS reads the clusters' endpoint targets).
            g.bench_function(format!("{short}/first"), |b| {
                b.iter_batched(
                    || {
                        let fresh = Generator::new();
                        if type_url == ENDPOINT {
                            fresh.generate(CLUSTER, &proxy, &push, &[]).unwrap();
                        }
                        fresh
                    },
                    |fresh| {
                        let out = fresh.generate(type_url, &proxy, &push, &names).unwrap();
                        (fresh, out)
                    },
                    BatchSize::SmallInput,
                )
            });
            g.bench_function(format!("{short}/cached"), |b| {
                b.iter(|| {
                    warm.generate(type_url, &proxy, &push, black_box(&names))
                        .unwrap()
                })
            });
        }
        g.finish();
    }
}

/// A Delta proxy reconnecting: its first request of every type names what it holds in
/// `initial_resource_versions`. `all_current`: it holds exactly what the edge would send
/// (nothing is to be sent); `fresh`: it holds nothing (its initial sync, for comparison).
/// The generator is warm, as on an edge that serves other proxies of the scope.
fn reconnect(c: &mut Criterion) {
    for sidecars in [true, false] {
        let variant = if sidecars { "sidecar" } else { "no_sidecar" };
        let (mesh, push) = support::push_context(&support::spec(SERVICES, sidecars));
        let proxy = support::proxy(&mesh, 0);
        let generator = Generator::new();
        let src = GeneratorSource {
            generator: &generator,
            push: &push,
        };
        let mut held = 0;
        let current: Vec<DeltaDiscoveryRequest> = TYPES
            .iter()
            .map(|(_, type_url)| {
                let names = subscription(&generator, type_url, &proxy, &push);
                let resources = generator.generate(type_url, &proxy, &push, &names).unwrap();
                held += resources.len();
                DeltaDiscoveryRequest {
                    type_url: type_url.to_string(),
                    resource_names_subscribe: names,
                    initial_resource_versions: resources
                        .iter()
                        .map(|r| (r.name.clone(), format!("{:016x}", r.hash)))
                        .collect(),
                    ..Default::default()
                }
            })
            .collect();
        let fresh: Vec<DeltaDiscoveryRequest> = current
            .iter()
            .map(|r| DeltaDiscoveryRequest {
                initial_resource_versions: Default::default(),
                ..r.clone()
            })
            .collect();
        let handle = |requests: &[DeltaDiscoveryRequest]| {
            let mut stream = DeltaStream::new(proxy.clone());
            let (mut responses, mut resources) = (0, 0);
            for req in requests {
                let reply = stream.on_request(&src, req).expect("request");
                responses += reply.responses.len();
                resources += reply
                    .responses
                    .iter()
                    .map(|r| r.resources.len())
                    .sum::<usize>();
            }
            (stream, responses, resources)
        };
        let (_, responses, resources) = handle(&current);
        assert_eq!(
            resources, 0,
            "a reconnect with everything current gets nothing"
        );
        eprintln!(
            "reconnect/{variant}: {held} resources held (4 types), all current: \
             {responses} responses, {resources} resources"
        );

        let mut g = c.benchmark_group(format!("reconnect/{variant}"));
        g.sample_size(20);
        g.bench_function("all_current", |b| b.iter(|| handle(black_box(&current))));
        g.bench_function("fresh", |b| b.iter(|| handle(black_box(&fresh))));
        g.finish();
    }
}

/// One connection: its stream and the scope it was last judged against.
struct Conn {
    stream: SotwStream,
    scope: Arc<SidecarScope>,
}

struct Fleet {
    push: Arc<PushContext>,
    generator: Generator,
    conns: Vec<Conn>,
    queue: PushQueue<u64, PushEvent>,
    /// Per-revision convergence, tracked as the edge tracks it.
    ledger: Arc<Ledger>,
    rt: tokio::runtime::Runtime,
}

fn request(type_url: &str, names: &[String], nonce: &str, version: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        type_url: type_url.into(),
        resource_names: names.to_vec(),
        response_nonce: nonce.into(),
        version_info: version.into(),
        ..Default::default()
    }
}

/// The encoded bytes of the resources in a stream's responses (a macro: the response
/// type is not nameable outside the crate).
macro_rules! encoded_bytes {
    ($responses:expr) => {
        $responses
            .iter()
            .flat_map(|r| r.resources.iter())
            .map(|r| r.resource.value.len())
            .sum::<usize>()
    };
}

/// Connects `n` proxies and takes each through its initial sync (CDS, EDS, LDS, RDS,
/// each requested then ACKed). Returns the streams and the bytes of resources sent.
fn connect(mesh: &Mesh, g: &Generator, push: &PushContext, n: usize) -> (Vec<Conn>, usize) {
    // Subscriptions depend only on the scope: computed once per namespace.
    let mut subscriptions: HashMap<String, Vec<Vec<String>>> = HashMap::new();
    let src = GeneratorSource { generator: g, push };
    let mut bytes = 0;
    let conns = (0..n)
        .map(|i| {
            let proxy = support::proxy(mesh, i);
            let subs = subscriptions
                .entry(proxy.namespace.clone())
                .or_insert_with(|| {
                    TYPES
                        .iter()
                        .map(|(_, t)| subscription(g, t, &proxy, push))
                        .collect()
                })
                .clone();
            let scope = push.sidecar_scope(&proxy.namespace, &proxy.labels);
            let mut stream = SotwStream::new(proxy);
            for ((_, type_url), names) in TYPES.iter().zip(&subs) {
                let reply = stream
                    .on_request(&src, &request(type_url, names, "", ""))
                    .expect("initial request");
                let response = &reply.responses[0];
                bytes += encoded_bytes!(reply.responses);
                stream
                    .on_request(
                        &src,
                        &request(type_url, names, &response.nonce, &response.version_info),
                    )
                    .expect("ACK");
            }
            Conn { stream, scope }
        })
        .collect();
    (conns, bytes)
}

/// The dispatcher's `needs_push`, through the public API.
fn needs_push(conn: &mut Conn, event: &PushEvent) -> bool {
    let proxy = conn.stream.proxy();
    let scope = event.push.sidecar_scope(&proxy.namespace, &proxy.labels);
    let prev = std::mem::replace(&mut conn.scope, scope.clone());
    proxy_needs_push(proxy.kind, &prev, &scope, &event.changes)
}

/// What one change cost: decided, queued, generated and diffed for every connection.
#[derive(Default, Debug)]
struct FanOut {
    decide: Duration,
    push: Duration,
    pushed: usize,
    responses: usize,
    bytes: usize,
}

impl Fleet {
    fn new(n: usize) -> Fleet {
        let (mesh, push) = support::push_context(&support::spec(SERVICES, true));
        let generator = Generator::new();
        let started = Instant::now();
        let (conns, bytes) = connect(&mesh, &generator, &push, n);
        eprintln!(
            "fanout: initial sync of {n} streams (4 types, requested and ACKed): {:?}, {} MiB of resources",
            started.elapsed(),
            bytes >> 20
        );
        Fleet {
            push: Arc::new(push),
            generator,
            conns,
            queue: PushQueue::new(),
            ledger: Arc::new(Ledger::new(256)),
            rt: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime"),
        }
    }

    /// Dispatches `event` to every connection it concerns and runs their pushes.
    fn fan_out(&mut self, event: PushEvent) -> FanOut {
        let mut out = FanOut::default();
        let started = Instant::now();
        let version = event.push.version();
        self.ledger
            .dispatched(version, &event.changes, std::time::SystemTime::now());
        for (id, conn) in self.conns.iter_mut().enumerate() {
            if needs_push(conn, &event) {
                let tracked = Revisions::concerned(&self.ledger, version);
                self.queue.enqueue(id as u64, event.tracked(tracked));
                out.pushed += 1;
            }
        }
        self.ledger.concerned(version, out.pushed as u64);
        out.decide = started.elapsed();
        let started = Instant::now();
        let (queue, conns, generator) = (&self.queue, &mut self.conns, &self.generator);
        self.rt.block_on(async {
            while queue.pending() > 0 {
                let (id, event) = queue.dequeue().await.expect("queued");
                let src = GeneratorSource {
                    generator,
                    push: &event.push,
                };
                let responses = conns[id as usize]
                    .stream
                    .on_push(&src, &PushScope::of(&event))
                    .expect("push");
                out.responses += responses.len();
                out.bytes += encoded_bytes!(responses);
                queue.mark_done(&id);
            }
        });
        out.push = started.elapsed();
        out
    }

    fn event(&self, full: bool, keys: BTreeSet<ChangeKey>) -> PushEvent {
        PushEvent::new(
            self.push.clone(),
            Arc::new(ChangeSet::of(
                full,
                keys,
                TriggerReason::Unknown,
                SystemTime::now(),
            )),
        )
    }
}

/// The next snapshot with `service`'s first endpoint moved (alternating addresses).
fn endpoint_change(push: &PushContext, service: &ServiceKey, flip: bool) -> PushContext {
    let mut eps = (**push.endpoints(service).expect("service has endpoints")).clone();
    eps.endpoints[0].address = if flip { "10.250.0.1" } else { "10.250.0.2" }.into();
    push.with_changes(push.version() + 1, [Chunk::Endpoints(eps)], [])
}

/// The next snapshot with a VirtualService's route timeout changed in `namespace`, and
/// what changed as the snapshot puller names it (`change::namespace_changes`: the
/// hostnames concerned; `None` when it cannot be narrowed).
fn vs_change(
    push: &PushContext,
    namespace: &str,
    vs: &str,
    flip: bool,
) -> (PushContext, Option<BTreeSet<ChangeKey>>) {
    let old = push.namespace(namespace).expect("namespace");
    let mut ns = (**old).clone();
    let vs = ns
        .virtual_services
        .iter_mut()
        .find(|v| v.name == vs)
        .expect("virtual service");
    vs.spec.http[0].timeout = Some(if flip { "7s" } else { "5s" }.into());
    let changes = namespace_changes(Some(old), Some(&ns));
    let next = push.with_changes(push.version() + 1, [Chunk::Namespace(ns)], []);
    (next, changes)
}

fn fanout(c: &mut Criterion) {
    // Connected on first use, so that running other benches does not pay for it.
    let mut fleet: Option<Fleet> = None;
    let (mesh, base) = support::push_context(&support::spec(SERVICES, true));
    let svc = mesh.services[1].clone();
    let key = ServiceKey {
        hostname: svc.hostname.clone(),
        namespace: svc.namespace.clone(),
    };
    let vs_svc = mesh.first_with_vs().expect("a VirtualService").clone();

    let mut g = c.benchmark_group("fanout");
    g.sample_size(10);
    let mut flip = false;

    // The edge applying a snapshot (PushContext::with_changes, as the puller does).
    g.bench_function("apply/eds_change", |b| {
        b.iter(|| endpoint_change(&base, &key, true))
    });
    g.bench_function("apply/vs_change", |b| {
        b.iter(|| vs_change(&base, &vs_svc.namespace, &vs_svc.name, true))
    });

    let report = |name: &str, last: &FanOut| {
        eprintln!(
            "fanout: {name} to {STREAMS} streams: {} pushed, {} responses, {} KiB; decide {:?}, generate+diff {:?}",
            last.pushed,
            last.responses,
            last.bytes >> 10,
            last.decide,
            last.push
        );
    };

    // One endpoint change: an EDS push to the streams whose scope holds the service.
    let mut last = None;
    g.bench_function("eds_change_10k_streams", |b| {
        let fleet = fleet.get_or_insert_with(|| Fleet::new(STREAMS));
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                flip = !flip;
                fleet.push = Arc::new(endpoint_change(&fleet.push, &key, flip));
                let updated = BTreeSet::from([ChangeKey::Service(key.clone())]);
                let event = fleet.event(false, updated);
                let out = fleet.fan_out(event);
                assert!(out.responses > 0);
                total += out.decide + out.push;
                last = Some(out);
            }
            total
        })
    });
    if let Some(last) = last.take() {
        report("one endpoint change", &last);
    }

    // One VirtualService change, narrowed as the puller narrows it (to the scopes that
    // hold its hosts): a full push (CDS, EDS, LDS, RDS regenerated once per scope, diffed
    // per stream) to those streams.
    g.bench_function("vs_change_10k_streams", |b| {
        let fleet = fleet.get_or_insert_with(|| Fleet::new(STREAMS));
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                flip = !flip;
                let (next, changes) = vs_change(&fleet.push, &vs_svc.namespace, &vs_svc.name, flip);
                fleet.push = Arc::new(next);
                let event = fleet.event(true, changes.expect("narrowed to its hosts"));
                let out = fleet.fan_out(event);
                assert!(out.responses > 0);
                total += out.decide + out.push;
                last = Some(out);
            }
            total
        })
    });
    if let Some(last) = last.take() {
        report("one VirtualService change", &last);
    }

    // A change that cannot be narrowed (a wildcard host, the first snapshot): a full push
    // to every stream.
    g.bench_function("full_push_10k_streams", |b| {
        let fleet = fleet.get_or_insert_with(|| Fleet::new(STREAMS));
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                flip = !flip;
                let (next, _) = vs_change(&fleet.push, &vs_svc.namespace, &vs_svc.name, flip);
                fleet.push = Arc::new(next);
                let event = fleet.event(true, BTreeSet::new());
                let out = fleet.fan_out(event);
                assert!(out.responses > 0);
                total += out.decide + out.push;
                last = Some(out);
            }
            total
        })
    });
    if let Some(last) = last.take() {
        report("an un-narrowed full push", &last);
    }
    g.finish();
}

/// One proxy's config dump in Envoy's JSON (`/debug/config_dump`, `shoal proxy-config`),
/// and its diff against a config that differs in nothing (`/debug/config_diff`): the cost
/// of asking about one proxy, all four types, its scope narrowed (`sidecar`) or the whole
/// mesh (`no_sidecar`).
/// The edge applying one endpoint change to a snapshot of 10,000 services × 10
/// endpoints, its service targets built (as an edge serving sidecars holds them), the
/// result then freed: what grows with the mesh rather than with the change.
fn apply_large(c: &mut Criterion) {
    let mut mesh: Option<(ServiceKey, PushContext)> = None;
    let mut g = c.benchmark_group("fanout");
    g.sample_size(10);
    g.bench_function("apply/eds_change_10k_services", |b| {
        let (key, base) = mesh.get_or_insert_with(|| {
            let (mesh, base) = support::push_context(&support::spec(10 * SERVICES, true));
            base.service_instances();
            let svc = &mesh.services[1];
            let key = ServiceKey {
                hostname: svc.hostname.clone(),
                namespace: svc.namespace.clone(),
            };
            (key, base)
        });
        b.iter(|| endpoint_change(base, key, true))
    });
    g.finish();
}

fn config_dump(c: &mut Criterion) {
    use shoal_edge::config_dump::{Held, config_diff, config_dump};
    for sidecars in [true, false] {
        let variant = if sidecars { "sidecar" } else { "no_sidecar" };
        let (mesh, push) = support::push_context(&support::spec(SERVICES, sidecars));
        let proxy = support::proxy(&mesh, 0);
        let g = Generator::new();
        let held: Vec<(&str, Vec<Arc<shoal_edge::xds::XdsResource>>)> = TYPES
            .iter()
            .map(|(_, t)| {
                let names = subscription(&g, t, &proxy, &push);
                (*t, g.generate(t, &proxy, &push, &names).unwrap())
            })
            .collect();
        let views: Vec<Held<'_>> = held
            .iter()
            .map(|(t, rs)| Held {
                type_url: t,
                version: "1",
                resources: rs,
            })
            .collect();
        let json = serde_json::to_vec(&config_dump(&views)).unwrap();
        let resources: usize = held.iter().map(|(_, rs)| rs.len()).sum();
        eprintln!(
            "config_dump/{variant}: {resources} resources, {} B of JSON",
            json.len()
        );
        let mut group = c.benchmark_group(format!("config_dump/{variant}"));
        group.sample_size(10);
        group.bench_function("dump", |b| b.iter(|| black_box(config_dump(&views))));
        group.bench_function("diff_unchanged", |b| {
            b.iter(|| {
                for (view, (_, now)) in views.iter().zip(&held) {
                    black_box(config_diff(view, now, 1));
                }
            })
        });
        group.finish();
    }
}

criterion_group!(
    benches,
    generate,
    reconnect,
    fanout,
    apply_large,
    config_dump
);
criterion_main!(benches);
