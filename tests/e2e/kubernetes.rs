//! The Kubernetes registry end to end: the example mesh created through the API of
//! `shoal-kube-test-server` (a test stand-in for the Kubernetes API server, not
//! Kubernetes), `ingest --registry kubernetes` watching it, builder and edge on real NATS
//! and Redis, and a real Envoy routing between two backends; then an edit made through
//! the API, timed until Envoy applies it.

use crate::scenario::Fixture;
use crate::support::envoy::XdsApi;
use crate::support::mesh;
use crate::support::process::wait_http_ok;
use crate::support::tiers;
use shoal_infra::testing::{NatsServer, RedisServer};
use shoal_kube_test_server::TestApiServer;
use std::path::Path;
use std::time::{Duration, Instant};

/// The API resource an object of `kind` is created as.
fn resource_of(kind: &str) -> &'static str {
    match kind {
        "Namespace" => "namespaces",
        "Service" => "services",
        "Pod" => "pods",
        "EndpointSlice" => "endpointslices.discovery.k8s.io",
        "VirtualService" => "virtualservices.networking.istio.io",
        "DestinationRule" => "destinationrules.networking.istio.io",
        other => panic!("the example mesh has no {other}"),
    }
}

/// Creates (or replaces) every object of the YAML documents in `text` through the API.
fn apply_yaml(server: &TestApiServer, text: &str) {
    for doc in text.split("\n---") {
        if doc.trim().is_empty() {
            continue;
        }
        let object: serde_json::Value = serde_norway::from_str(doc).expect("example YAML");
        let kind = object["kind"].as_str().expect("kind").to_string();
        server
            .apply(resource_of(&kind), object)
            .unwrap_or_else(|e| panic!("creating a {kind}: {e}"));
    }
}

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
    let mut ingest = tiers::ingest_with(
        &[
            "--registry",
            "kubernetes",
            "--kubeconfig",
            &kubeconfig.display().to_string(),
        ],
        &nats.url(),
        dir.path(),
    );
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
    for tier in [&mut ingest.proc, &mut builder.proc, &mut edge.proc] {
        tier.assert_running();
        tier.stop(Duration::from_secs(5));
    }
}
