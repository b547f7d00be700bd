//! The generation cost of security policy, per proxy: a sidecar's CDS and LDS made for
//! the first time (a generator that has seen nothing), as today's plaintext proxy, as a
//! proxy with the mesh's identity (auto mTLS clusters, PERMISSIVE inbound chains), and as
//! that proxy in a mesh with 100 AuthorizationPolicies (10 per namespace, namespace-wide,
//! two rules each: 10 apply to every proxy) and a STRICT PeerAuthentication.
//!
//! ```sh
//! cargo bench -p shoal-edge --bench policy -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! The mesh: 1k services × 10 endpoints in 10 namespaces, no Sidecar (every proxy sees
//! every service), as `xds`'s `no_sidecar`.

mod support;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use shoal_edge::proxy::Proxy;
use shoal_edge::xds::Generator;
use shoal_proto::config::security::{
    AuthorizationPolicy, AuthorizationRule, Operation, PeerAuthentication, PeerMutualTls, RuleFrom,
    RuleTo, Source,
};
use shoal_proto::model::NamedConfig;
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::Chunk;
use shoal_proto::xds::types::{CLUSTER, LISTENER};

const SERVICES: usize = 1_000;
const POLICIES_PER_NAMESPACE: usize = 10;

fn named<T>(ns: &str, name: String, spec: T) -> NamedConfig<T> {
    NamedConfig {
        name,
        namespace: ns.into(),
        created: 0,
        spec,
    }
}

/// `push` with 10 namespace-wide AuthorizationPolicies and a STRICT PeerAuthentication
/// in each namespace.
fn with_policies(push: &PushContext) -> PushContext {
    let chunks: Vec<Chunk> = push
        .namespaces()
        .values()
        .map(|ns| {
            let mut ns = (**ns).clone();
            let name = ns.namespace.clone();
            for i in 0..POLICIES_PER_NAMESPACE {
                let rules = vec![
                    AuthorizationRule {
                        from: vec![RuleFrom {
                            source: Some(Source {
                                principals: vec![format!("cluster.local/ns/{name}/sa/client-{i}")],
                                ..Default::default()
                            }),
                        }],
                        to: vec![RuleTo {
                            operation: Some(Operation {
                                methods: vec!["GET".into()],
                                paths: vec![format!("/api/{i}/*")],
                                ..Default::default()
                            }),
                        }],
                        ..Default::default()
                    },
                    AuthorizationRule {
                        from: vec![RuleFrom {
                            source: Some(Source {
                                namespaces: vec!["ns-0".into()],
                                ..Default::default()
                            }),
                        }],
                        ..Default::default()
                    },
                ];
                let action = if i == 0 { "DENY" } else { "ALLOW" };
                ns.authorization_policies.push(named(
                    &name,
                    format!("policy-{i}"),
                    AuthorizationPolicy {
                        action: Some(action.into()),
                        rules,
                        ..Default::default()
                    },
                ));
            }
            ns.peer_authentications.push(named(
                &name,
                "default".into(),
                PeerAuthentication {
                    mtls: Some(PeerMutualTls {
                        mode: Some("STRICT".into()),
                    }),
                    ..Default::default()
                },
            ));
            Chunk::Namespace(ns)
        })
        .collect();
    push.with_changes(push.version() + 1, chunks, [])
}

fn meshed(mut proxy: Proxy) -> Proxy {
    proxy
        .labels
        .insert("security.istio.io/tlsMode".into(), "istio".into());
    proxy
}

fn policy(c: &mut Criterion) {
    let (mesh, push) = support::push_context(&support::spec(SERVICES, false));
    let policed = with_policies(&push);
    // The proxy of one of its service's endpoints, so that it has inbound chains.
    let mut plain = support::proxy(&mesh, 0);
    let svc = &mesh.services[0];
    let key = shoal_proto::model::ServiceKey {
        hostname: svc.hostname.clone(),
        namespace: svc.namespace.clone(),
    };
    plain.ip = push.endpoints(&key).expect("endpoints").endpoints[0]
        .address
        .clone();
    let cases = [
        ("today", plain.clone(), &push),
        ("mesh_identity", meshed(plain.clone()), &push),
        ("mesh_identity_100_policies", meshed(plain), &policed),
    ];
    let mut g = c.benchmark_group("policy");
    g.sample_size(20);
    for (name, proxy, push) in &cases {
        for (short, type_url) in [("cds", CLUSTER), ("lds", LISTENER)] {
            let out = Generator::new()
                .generate(type_url, proxy, push, &[])
                .unwrap();
            let bytes: usize = out.iter().map(|r| r.resource.value.len()).sum();
            eprintln!(
                "{name}: {short}: {} resources, {bytes} B encoded",
                out.len()
            );
            g.bench_function(format!("{name}/{short}/first"), |b| {
                b.iter_batched(
                    Generator::new,
                    |fresh| {
                        let out = fresh.generate(type_url, proxy, push, &[]).unwrap();
                        (fresh, out)
                    },
                    BatchSize::SmallInput,
                )
            });
        }
    }
    g.finish();
}

criterion_group!(benches, policy);
criterion_main!(benches);
