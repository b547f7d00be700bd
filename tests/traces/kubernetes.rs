//! A change made through the Kubernetes API (`shoal-kube-test-server`, a stand-in for the
//! API server), the tiers split over real NATS and Redis: one trace whose ingest spans are
//! `shoal-ingest`'s, builder spans `shoal-builder`'s and edge spans `shoal-edge`'s, the
//! context carried in the NATS headers of `shoal.push` and `shoal.snapshot`.

use crate::receiver::Receiver;
use crate::support::kube::apply_yaml;
use crate::support::process::wait_http_ok;
use crate::support::{mesh, tiers};
use crate::{BUILDER, EDGE, INGEST, SERVICE_PORT, connect_proxy, one, trace_of};
use shoal_infra::testing::{NatsServer, RedisServer, free_port};
use shoal_kube_test_server::TestApiServer;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_through_the_kubernetes_api_is_one_trace_across_the_split_tiers() {
    let started = Instant::now();
    let receiver = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let api = TestApiServer::start().await.expect("test API server");
    apply_yaml(
        &api,
        &mesh::services(SERVICE_PORT, free_port(), free_port()),
    );
    apply_yaml(&api, mesh::DESTINATION_RULE);
    apply_yaml(&api, &mesh::virtual_service(80));
    let kubeconfig = api.kubeconfig(dir.path()).expect("kubeconfig");
    let kubeconfig = kubeconfig.display().to_string();

    let otel = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()),
        ("OTEL_BSP_SCHEDULE_DELAY", "200".to_string()),
    ];
    let (nats, redis) = (NatsServer::start(), RedisServer::start());
    let ingest = tiers::ingest_env(
        "cluster-1",
        &["--kubeconfig", &kubeconfig],
        &nats.url(),
        &otel,
        dir.path(),
    );
    let builder = tiers::builder_env(1, &nats.url(), &redis.url(), &[], &otel, dir.path());
    let edge = tiers::edge_env(1, &nats.url(), &redis.url(), &[], &otel, dir.path());
    for (port, tail) in [
        (ingest.http, ingest.proc.tail(30)),
        (builder.http, builder.proc.tail(30)),
        (edge.http, edge.proc.tail(30)),
    ] {
        let ready = format!("http://127.0.0.1:{port}/healthz/ready");
        assert!(
            wait_http_ok(&ready, Duration::from_secs(30)).await,
            "a tier is not ready:\n{tail}"
        );
    }
    let mut seen = connect_proxy(edge.xds);
    tokio::time::timeout(Duration::from_secs(10), seen.wait_for(|n| *n >= 3))
        .await
        .expect("the proxy's first responses")
        .unwrap();

    apply_yaml(&api, &mesh::virtual_service(50));
    let trace = trace_of(&receiver, "VirtualService", Duration::from_secs(30)).await;
    for (names, service) in [
        (INGEST, "shoal-ingest"),
        (BUILDER, "shoal-builder"),
        (EDGE, "shoal-edge"),
    ] {
        for name in names {
            assert_eq!(one(&trace, name).service, service, "{name}");
        }
    }
    let revision = &one(&trace, "config change").attributes["revision"];
    assert_eq!(&one(&trace, "build").attributes["revision"], revision);
    let converge = one(&trace, "converge");
    assert_eq!(converge.attributes["acked"], "1", "{converge:?}");
    eprintln!("kubernetes trace test took {:?}", started.elapsed());
}
