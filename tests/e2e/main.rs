//! End to end on real components: Istio YAML in a directory → Shoal → a real Envoy
//! routing real HTTP between two backends. Run once with the three tiers as separate
//! processes joined by real NATS and Redis, once with the all-in-one `shoal`.

#[path = "../support/mod.rs"]
mod support;

mod scenario;

use shoal_infra::testing::{NatsServer, RedisServer};
use std::time::Duration;
use support::process::{Proc, wait_http_ok};
use support::{free_port, workspace_binary};

/// The end-to-end tests measure timings: run them one at a time on a 2-core machine.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_tiers_with_nats_and_redis_route_envoy() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config_dir = dir.path().join("config");
    let fixture = scenario::Fixture::new(&config_dir).await;

    let nats = NatsServer::start();
    let redis = RedisServer::start();
    let (ingest_http, builder_http, edge_http, xds_port) =
        (free_port(), free_port(), free_port(), free_port());
    let env = [("RUST_LOG", "info".to_string())];
    let mut ingest = Proc::spawn(
        "ingest",
        &workspace_binary("ingest"),
        &[
            "--config-dir".into(),
            config_dir.display().to_string(),
            "--cluster-id".into(),
            "cluster-1".into(),
            "--nats-url".into(),
            nats.url(),
            "--http-addr".into(),
            format!("127.0.0.1:{ingest_http}"),
        ],
        &env,
        dir.path(),
    );
    let mut builder = Proc::spawn(
        "builder",
        &workspace_binary("builder"),
        &[
            "--nats-url".into(),
            nats.url(),
            "--redis-url".into(),
            redis.url(),
            "--http-addr".into(),
            format!("127.0.0.1:{builder_http}"),
        ],
        &env,
        dir.path(),
    );
    let mut edge = Proc::spawn(
        "edge",
        &workspace_binary("edge"),
        &[
            "--nats-url".into(),
            nats.url(),
            "--redis-url".into(),
            redis.url(),
            "--xds-addr".into(),
            format!("127.0.0.1:{xds_port}"),
            "--http-addr".into(),
            format!("127.0.0.1:{edge_http}"),
        ],
        &env,
        dir.path(),
    );
    for (name, port) in [
        ("ingest", ingest_http),
        ("builder", builder_http),
        ("edge", edge_http),
    ] {
        assert!(
            wait_http_ok(
                &format!("http://127.0.0.1:{port}/healthz/ready"),
                Duration::from_secs(30)
            )
            .await,
            "{name} not ready"
        );
    }
    let report = fixture
        .run(
            xds_port,
            edge_http,
            ingest_http,
            dir.path(),
            &mut [&mut ingest, &mut builder, &mut edge],
        )
        .await;
    println!("e2e three-tier: {report}");
    for p in [&mut ingest, &mut builder, &mut edge] {
        p.assert_running();
        p.stop(Duration::from_secs(5));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_shoal_routes_envoy() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config_dir = dir.path().join("config");
    let fixture = scenario::Fixture::new(&config_dir).await;
    let (http, xds_port) = (free_port(), free_port());
    let mut shoal = Proc::spawn(
        "shoal",
        std::path::Path::new(env!("CARGO_BIN_EXE_shoal")),
        &[
            "--config-dir".into(),
            config_dir.display().to_string(),
            "--xds-addr".into(),
            format!("127.0.0.1:{xds_port}"),
            "--http-addr".into(),
            format!("127.0.0.1:{http}"),
        ],
        &[("RUST_LOG", "info".to_string())],
        dir.path(),
    );
    assert!(
        wait_http_ok(
            &format!("http://127.0.0.1:{http}/healthz/ready"),
            Duration::from_secs(30)
        )
        .await,
        "shoal not ready"
    );
    let report = fixture
        .run(xds_port, http, http, dir.path(), &mut [&mut shoal])
        .await;
    println!("e2e embedded: {report}");
    shoal.assert_running();
    shoal.stop(Duration::from_secs(5));
}
