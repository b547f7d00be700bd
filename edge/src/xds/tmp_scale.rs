use super::testing::*;
use super::{Generator, types};
use crate::proxy::InterceptionMode;
use shoal_proto::model::{NamedConfig, NamespaceConfig, Protocol};
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::Chunk;

#[test]
fn tmp_scale() {
    let mut chunks = vec![];
    for n in 0..50 {
        let ns = format!("ns{n}");
        let mut cfg = NamespaceConfig {
            namespace: ns.clone(),
            ..Default::default()
        };
        for i in 0..100 {
            cfg.services.push(service(
                &ns,
                &format!("svc{i}"),
                vec![
                    port("http", 8080, Protocol::Http),
                    port("grpc", 9090, Protocol::Grpc),
                    port("tcp", 5000 + i, Protocol::Tcp),
                ],
                Some(&format!("10.{n}.{i}.1")),
            ));
            if i % 10 == 0 {
                let mut vs = reviews_vs();
                vs.hosts = vec![format!("svc{i}.{ns}.svc.cluster.local")];
                cfg.virtual_services.push(NamedConfig {
                    name: format!("vs{i}"),
                    namespace: ns.clone(),
                    spec: vs,
                });
            }
        }
        chunks.push(Chunk::Namespace(cfg));
    }
    let push = PushContext::from_chunks(1, chunks);
    let p = proxy("ns0", "10.1.0.5", InterceptionMode::Redirect);
    let start = std::time::Instant::now();
    let _ = push.sidecar_scope("ns0", &p.labels);
    eprintln!("TMP scope {:?}", start.elapsed());
    let g = Generator::new();
    for t in types::PUSH_ORDER {
        let start = std::time::Instant::now();
        let r = g.generate(t, &p, &push, &[]).unwrap();
        let bytes: usize = r.iter().map(|x| x.resource.value.len()).sum();
        eprintln!(
            "TMP {t}: {} resources, {} bytes, {:?}",
            r.len(),
            bytes,
            start.elapsed()
        );
    }
}
#[test]
fn tmp_sizes() {
    use envoy_types::pb::envoy::config::{
        cluster::v3::Cluster,
        listener::v3::Listener,
        route::v3::{Route, VirtualHost},
    };
    eprintln!(
        "TMP sizes cluster {} listener {} vhost {} route {}",
        std::mem::size_of::<Cluster>(),
        std::mem::size_of::<Listener>(),
        std::mem::size_of::<VirtualHost>(),
        std::mem::size_of::<Route>()
    );
}
#[test]
fn tmp_phases() {
    let mut chunks = vec![];
    for n in 0..50 {
        let ns = format!("ns{n}");
        let mut cfg = NamespaceConfig {
            namespace: ns.clone(),
            ..Default::default()
        };
        for i in 0..100 {
            cfg.services.push(service(
                &ns,
                &format!("svc{i}"),
                vec![
                    port("http", 8080, Protocol::Http),
                    port("grpc", 9090, Protocol::Grpc),
                    port("tcp", 5000 + i, Protocol::Tcp),
                ],
                Some(&format!("10.{n}.{i}.1")),
            ));
            if i % 10 == 0 {
                let mut vs = reviews_vs();
                vs.hosts = vec![format!("svc{i}.{ns}.svc.cluster.local")];
                cfg.virtual_services.push(NamedConfig {
                    name: format!("vs{i}"),
                    namespace: ns.clone(),
                    spec: vs,
                });
            }
        }
        chunks.push(Chunk::Namespace(cfg));
    }
    let push = PushContext::from_chunks(1, chunks);
    let scope = push.sidecar_scope("ns0", &Default::default());
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let b = super::clusters::build(&scope, &push, &Default::default(), true);
        let t1 = t.elapsed();
        let enc: Vec<_> = b
            .clusters
            .iter()
            .map(|c| super::util::resource(c.name.clone(), c))
            .collect();
        let t2 = t.elapsed();
        drop(enc);
        drop(b);
        let t3 = t.elapsed();
        let r = super::routes::build(&scope, &Default::default());
        let t4 = t.elapsed();
        drop(r);
        eprintln!(
            "TMP build {t1:?} encode {:?} drop {:?} routes {:?}",
            t2 - t1,
            t3 - t2,
            t4 - t3
        );
    }
}
