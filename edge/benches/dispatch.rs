//! The dispatcher's decision alone: for one snapshot update, which of an edge's streams it
//! concerns and what each is sent (`ads::dispatch::decide`, what `Shared::dispatch` runs
//! before queueing), over 125,000 registered streams: an edge's share of a million
//! proxies over 8 edges.
//!
//! ```sh
//! cargo bench -p shoal-edge --bench dispatch -- --warm-up-time 1 --measurement-time 5
//! ```
//!
//! The mesh is the million-proxy run's (`deploy/scale-run.sh 1000000 8 vs 1000 100`):
//! 1,000 services × 10 endpoints over 100 namespaces, each with a Sidecar narrowing egress
//! to its own namespace. The streams are the loadtest's proxies: captured sidecars in
//! `ns-<i mod 100>` labelled `app: loadtest`, at addresses no endpoint has. Nothing is
//! queued or sent: what is measured is the decision for every stream, for one
//! VirtualService change (a new config index: every stream is judged against new scopes)
//! and one endpoint change (the index stays).
//!
//! `eds_change_125k_workloads` is the endpoint change where, as in a real mesh, the
//! proxies are the endpoints: 1,000 services × 125 endpoints, proxy `i` at endpoint
//! `i / 1000` of service `i mod 1000`. An endpoint change then moves the addresses of
//! streams, whose inbound ports are looked up in the new snapshot's service targets;
//! `service_change_125k_*` edit a Service's labels (a new index too).

mod support;

// The allocator the edge binary runs with.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main};
use shoal_edge::ads::DecisionBench;
use shoal_edge::proxy::Proxy;
use shoal_edge::push_queue::PushEvent;
use shoal_proto::change::{ChangeKey, ChangeSet, TriggerReason, namespace_changes};
use shoal_proto::model::ServiceKey;
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::Chunk;
use shoal_test_support::meshgen::{Mesh, MeshSpec, endpoint_ip, namespace_name};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

const STREAMS: usize = 125_000;
const NAMESPACES: usize = 100;

/// Proxy `i` of the loadtest (`loadtest/src/proxy/identity.rs`): a captured sidecar in
/// `ns-<i mod N>` at `100.64.0.0/10`, labelled `app: loadtest`.
fn loadtest_proxy(i: usize) -> Proxy {
    let ip = format!(
        "100.{}.{}.{}",
        64 + (i >> 16) % 64,
        (i >> 8) & 0xff,
        i & 0xff
    );
    let namespace = namespace_name(i % NAMESPACES);
    support::sidecar(
        ip,
        &format!("proxy-{i}"),
        &namespace,
        &[("app", "loadtest")],
    )
}

/// Proxy `i` of a mesh whose workloads are its proxies: endpoint `i / services` of
/// service `i mod services`, labelled as its pods.
fn workload_proxy(mesh: &Mesh, i: usize) -> Proxy {
    let services = mesh.services.len();
    let svc = &mesh.services[i % services];
    support::sidecar(
        endpoint_ip(i % services, i / services),
        &format!("{}-{i}", svc.name),
        &svc.namespace,
        &[("app", &svc.name)],
    )
}

fn event(push: &Arc<PushContext>, full: bool, keys: BTreeSet<ChangeKey>) -> PushEvent {
    PushEvent::new(
        push.clone(),
        Arc::new(ChangeSet::of(
            full,
            keys,
            TriggerReason::Unknown,
            SystemTime::now(),
        )),
    )
}

/// The next snapshot with a VirtualService's route timeout flipped, and its change as
/// the snapshot puller names it.
fn vs_change(push: &PushContext, namespace: &str, vs: &str, flip: bool) -> PushEvent {
    let old = push.namespace(namespace).expect("namespace");
    let mut ns = (**old).clone();
    let vs = ns
        .virtual_services
        .iter_mut()
        .find(|v| v.name == vs)
        .expect("virtual service");
    vs.spec.http[0].timeout = Some(if flip { "7s" } else { "5s" }.into());
    let changes = namespace_changes(Some(old), Some(&ns)).expect("narrowed to its hosts");
    let next = push.with_changes(push.version() + 1, [Chunk::Namespace(ns)], []);
    event(&Arc::new(next), true, changes)
}

/// The next snapshot with `service`'s labels changed (a Service edited), and its change
/// as the snapshot puller names it.
fn service_change(push: &PushContext, service: &ServiceKey, flip: bool) -> PushEvent {
    let old = push.namespace(&service.namespace).expect("namespace");
    let mut ns = (**old).clone();
    let svc = ns
        .services
        .iter_mut()
        .find(|s| s.hostname == service.hostname)
        .expect("service");
    svc.labels.insert("bench".into(), flip.to_string());
    let changes = namespace_changes(Some(old), Some(&ns)).expect("narrowed to its hosts");
    let next = push.with_changes(push.version() + 1, [Chunk::Namespace(ns)], []);
    event(&Arc::new(next), true, changes)
}

/// The next snapshot with `service`'s first endpoint moved.
fn endpoint_change(push: &PushContext, service: &ServiceKey, flip: bool) -> PushEvent {
    let mut eps = (**push.endpoints(service).expect("service has endpoints")).clone();
    eps.endpoints[0].address = if flip { "10.250.0.1" } else { "10.250.0.2" }.into();
    let next = push.with_changes(push.version() + 1, [Chunk::Endpoints(eps)], []);
    event(
        &Arc::new(next),
        false,
        [ChangeKey::Service(service.clone())].into(),
    )
}

fn decision(c: &mut Criterion) {
    let spec = MeshSpec {
        services: 1_000,
        endpoints_per_service: 10,
        namespaces: NAMESPACES,
        ..MeshSpec::default()
    };
    let (mesh, push) = support::push_context(&spec);
    let started = Instant::now();
    let fleet = DecisionBench::default();
    for i in 0..STREAMS {
        fleet.connect(loadtest_proxy(i), &push);
    }
    eprintln!(
        "dispatch: {STREAMS} streams registered in {:?}",
        started.elapsed()
    );
    let vs_svc = mesh.first_with_vs().expect("a VirtualService").clone();
    let svc = &mesh.services[1];
    let key = ServiceKey {
        hostname: svc.hostname.clone(),
        namespace: svc.namespace.clone(),
    };

    let mut g = c.benchmark_group("decide");
    g.sample_size(10);
    let mut push = push;
    bench_decide(
        &mut g,
        "vs_change_125k_streams",
        &fleet,
        &mut push,
        |push, flip| vs_change(push, &vs_svc.namespace, &vs_svc.name, flip),
    );
    bench_decide(
        &mut g,
        "eds_change_125k_streams",
        &fleet,
        &mut push,
        |push, flip| endpoint_change(push, &key, flip),
    );
    bench_decide(
        &mut g,
        "service_change_125k_streams",
        &fleet,
        &mut push,
        |push, flip| service_change(push, &key, flip),
    );
    drop(fleet);

    let spec = MeshSpec {
        endpoints_per_service: STREAMS / spec.services,
        ..spec
    };
    let (mesh, mut push) = support::push_context(&spec);
    let fleet = DecisionBench::default();
    for i in 0..STREAMS {
        fleet.connect(workload_proxy(&mesh, i), &push);
    }
    bench_decide(
        &mut g,
        "eds_change_125k_workloads",
        &fleet,
        &mut push,
        |push, flip| endpoint_change(push, &key, flip),
    );
    bench_decide(
        &mut g,
        "service_change_125k_workloads",
        &fleet,
        &mut push,
        |push, flip| service_change(push, &key, flip),
    );
    g.finish();
}

/// Times `fleet`'s decision of fresh updates, each made (untimed) by `next` from the
/// last, so that every VirtualService change brings a new index whose scopes are cut
/// during the decision.
fn bench_decide(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    fleet: &DecisionBench,
    push: &mut PushContext,
    mut next: impl FnMut(&PushContext, bool) -> PushEvent,
) {
    let mut flip = false;
    let mut last = (0, 0);
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                flip = !flip;
                let event = next(push, flip);
                let started = Instant::now();
                last = fleet.decide(&event);
                total += started.elapsed();
                *push = (*event.push).clone();
            }
            total
        })
    });
    eprintln!(
        "dispatch: {name}: {} of {STREAMS} streams concerned, {} full",
        last.0, last.1
    );
}

criterion_group!(benches, decision);
criterion_main!(benches);
