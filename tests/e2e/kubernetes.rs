//! The Kubernetes registry end to end: the example mesh created through the API of
//! `shoal-kube-test-server` (a test stand-in for the Kubernetes API server, not
//! Kubernetes), `ingest --registry kubernetes` watching it, builder and edge on real NATS
//! and Redis, and a real Envoy routing between two backends; then an edit made through
//! the API, timed until Envoy applies it; then edits across watch failures (watches
//! dropped, `410 Gone`, the API server restarted) while Envoy serves.

use crate::scenario::Fixture;
use crate::support::envoy::XdsApi;
use crate::support::kube::apply_yaml;
use crate::support::mesh;
use crate::support::process::wait_http_ok;
use crate::support::tiers;
use shoal_infra::testing::{NatsServer, RedisServer};
use shoal_kube_test_server::TestApiServer;
use std::path::Path;
use std::time::{Duration, Instant};

/// Every YAML file the fixture wrote, through the API.
fn apply_dir(server: &TestApiServer, dir: &Path) {
    for rel in [
        "services.yaml",
        "routing/destination-rule.yaml",
        "routing/virtual-service.yaml",
    ] {
        let text = std::fs::read_to_string(dir.join(rel)).expect("fixture file");
        apply_yaml(server, &text);
    }
}

/// `ingest --kubeconfig PATH` (which alone means the Kubernetes registry) watching the
/// API server of `kubeconfig`.
fn kubernetes_ingest(kubeconfig: &Path, nats: &str, dir: &Path) -> tiers::Tier {
    let kubeconfig = kubeconfig.display().to_string();
    let source = ["--kubeconfig", &kubeconfig];
    tiers::ingest_with(&source, nats, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_written_through_the_api_route_envoy() {
    let _serial = crate::SERIAL.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config_dir = dir.path().join("config");
    let fixture = Fixture::new(&config_dir).await;
    let api = TestApiServer::start().await.expect("test API server");
    apply_dir(&api, &config_dir);
    let kubeconfig = api.kubeconfig(dir.path()).expect("kubeconfig");

    let (nats, redis) = (NatsServer::start(), RedisServer::start());
    let mut ingest = kubernetes_ingest(&kubeconfig, &nats.url(), dir.path());
    let mut builder = tiers::builder(1, &nats.url(), &redis.url(), dir.path());
    let mut edge = tiers::edge(1, &nats.url(), &redis.url(), &[], dir.path());
    for port in [ingest.http, builder.http, edge.http] {
        assert!(
            wait_http_ok(
                &format!("http://127.0.0.1:{port}/healthz/ready"),
                Duration::from_secs(30)
            )
            .await,
            "a tier is not ready:\n{}",
            ingest.proc.tail(30)
        );
    }
    let envoy = fixture.start_envoy(XdsApi::Sotw, &[edge.xds], dir.path());
    let client = Fixture::client();

    // First config, then the 80/20 split and the header route, as from files.
    let started = Instant::now();
    while fixture.get(&client, None).await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "Envoy never routed:\n{}",
            envoy.proc.tail(30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let first = started.elapsed();
    let mut v2 = 0;
    for _ in 0..200 {
        if fixture.get(&client, None).await.as_deref() == Ok("v2") {
            v2 += 1;
        }
    }
    assert!((20..=60).contains(&v2), "v2 share {v2}/200 is not 20% ± 10");
    for _ in 0..20 {
        assert_eq!(
            fixture.get(&client, Some("jason")).await.as_deref(),
            Ok("v2")
        );
    }

    // An edit through the API: everything to v2, timed until Envoy applies it.
    apply_yaml(&api, &mesh::virtual_service(0));
    let written = Instant::now();
    let mut streak = 0;
    let mut applied = None;
    while streak < 20 {
        match fixture.get(&client, None).await.as_deref() {
            Ok("v2") => {
                applied.get_or_insert(written.elapsed());
                streak += 1;
            }
            Ok(_) => {
                applied = None;
                streak = 0;
            }
            Err(e) => panic!("a request failed during the edit: {e}"),
        }
        assert!(
            written.elapsed() < Duration::from_secs(10),
            "the API edit never reached Envoy"
        );
    }
    let applied = applied.expect("applied");
    println!(
        "e2e kubernetes: first route {:.2} s after the tiers were ready; an API write applied \
         by Envoy {} ms later",
        first.as_secs_f64(),
        applied.as_millis()
    );

    // Watch failures while Envoy serves: each fault, then an edit made across it, which
    // must reach Envoy with no request failing.
    api.drop_watches();
    apply_yaml(&api, &mesh::virtual_service(100));
    all_answer(
        &fixture,
        &client,
        "v1",
        "an edit after the watches were dropped",
    )
    .await;
    api.compact();
    api.drop_watches();
    apply_yaml(&api, &mesh::virtual_service(0));
    all_answer(&fixture, &client, "v2", "an edit after 410 Gone").await;
    let edit_while_down = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        apply_yaml(&api, &mesh::virtual_service(100));
    };
    let (restarted, ()) = tokio::join!(api.restart(Duration::from_secs(2)), edit_while_down);
    restarted.expect("API server restarted");
    all_answer(
        &fixture,
        &client,
        "v1",
        "an edit made while the API server was down",
    )
    .await;
    let rejections: serde_json::Value =
        reqwest::get(format!("http://127.0.0.1:{}/debug/rejections", ingest.http))
            .await
            .expect("rejections")
            .json()
            .await
            .expect("json");
    assert_eq!(rejections, serde_json::json!([]), "nothing rejected");

    for tier in [&mut ingest.proc, &mut builder.proc, &mut edge.proc] {
        tier.assert_running();
        tier.stop(Duration::from_secs(5));
    }
}

/// Sends requests until 20 in a row are served by `backend`; any failed request, or no
/// such streak within 15 s, fails the test.
async fn all_answer(fixture: &Fixture, client: &reqwest::Client, backend: &str, what: &str) {
    let started = Instant::now();
    let mut streak = 0;
    while streak < 20 {
        match fixture.get(client, None).await {
            Ok(body) if body == backend => streak += 1,
            Ok(_) => streak = 0,
            Err(e) => panic!("a request failed waiting for {what}: {e}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{what} never reached Envoy"
        );
    }
}

/// Ingest's memory and CPU to load a large cluster through the API: `SHOAL_KUBE_SERVICES`
/// Services (10,000), each with an EndpointSlice and `SHOAL_KUBE_PODS_PER_SERVICE` Pods
/// (10: 100,000 Pods) on 1,000 Nodes in three zones, in 100 namespaces, written to real
/// NATS. The figure in
/// BENCHMARKS.md:
/// `cargo test --release -p shoal --test e2e -- --ignored --nocapture ingest_loads_a_large_cluster`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand, in release"]
async fn ingest_loads_a_large_cluster() {
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (services, pods_per_service) = (
        env("SHOAL_KUBE_SERVICES", 10_000),
        env("SHOAL_KUBE_PODS_PER_SERVICE", 10),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let api = TestApiServer::start().await.expect("test API server");
    for ns in 0..100 {
        api.apply(
            "namespaces",
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("ns-{ns}")}}),
        )
        .unwrap();
    }
    // Nodes in three zones: every Pod takes its locality from its Node.
    const NODES: usize = 1_000;
    for n in 0..NODES {
        api.apply(
            "nodes",
            serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {
                "name": format!("node-{n}"), "labels": {
                    "topology.kubernetes.io/region": "us-east1",
                    "topology.kubernetes.io/zone": format!("us-east1-{}", ["b", "c", "d"][n % 3])}}}),
        )
        .unwrap();
    }
    for s in 0..services {
        let (ns, name) = (format!("ns-{}", s % 100), format!("svc-{s}"));
        api.apply("services", serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 8080, "targetPort": 9080}]},
        }))
        .unwrap();
        let mut endpoints = Vec::new();
        for p in 0..pods_per_service {
            let pod = format!("{name}-{p}");
            let n = s * pods_per_service + p;
            let ip = format!("10.{}.{}.{}", n / 65536 % 256, n / 256 % 256, n % 256);
            api.apply(
                "pods",
                serde_json::json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": pod, "namespace": ns, "labels": {"app": name}},
                    "spec": {"serviceAccountName": "default", "nodeName": format!("node-{}", n % NODES)},
                    "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]},
                }),
            )
            .unwrap();
            endpoints.push(serde_json::json!({
                "addresses": [ip], "conditions": {"ready": true},
                "targetRef": {"kind": "Pod", "name": pod, "namespace": ns},
            }));
        }
        api.apply(
            "endpointslices.discovery.k8s.io",
            serde_json::json!({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": format!("{name}-1"), "namespace": ns,
                             "labels": {"kubernetes.io/service-name": name}},
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 9080}],
                "endpoints": endpoints,
            }),
        )
        .unwrap();
    }
    let kubeconfig = api.kubeconfig(dir.path()).expect("kubeconfig");
    let nats = NatsServer::start();
    // This process serves the API (the stand-in): its CPU during the load is the API
    // server's share of the 2 cores, apart from ingest's.
    let api_cpu = || {
        shoal_loadtest::run::procfs::sample("self")
            .expect("this process's /proc")
            .cpu_s
    };
    let api_cpu_before = api_cpu();
    let started = Instant::now();
    let mut ingest = kubernetes_ingest(&kubeconfig, &nats.url(), dir.path());
    assert!(
        wait_http_ok(
            &format!("http://127.0.0.1:{}/healthz/ready", ingest.http),
            Duration::from_secs(600)
        )
        .await,
        "ingest never synced:\n{}",
        ingest.proc.tail(30)
    );
    let synced = started.elapsed();
    let sample = shoal_loadtest::run::procfs::sample(&ingest.proc.pid().to_string())
        .expect("ingest's /proc");
    let api_cpu = api_cpu() - api_cpu_before;
    println!(
        "ingest, {services} Services / {} Pods / {services} EndpointSlices through the API: \
         synced and written to NATS in {:.1} s; CPU {:.1} s; RSS {:.0} MiB (peak {:.0} MiB); \
         the API server stand-in (this process) meanwhile: CPU {api_cpu:.1} s",
        services * pods_per_service,
        synced.as_secs_f64(),
        sample.cpu_s,
        sample.rss_kib as f64 / 1024.0,
        sample.peak_rss_kib as f64 / 1024.0
    );
    ingest.proc.stop(Duration::from_secs(10));
}
