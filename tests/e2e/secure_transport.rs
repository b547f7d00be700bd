//! The three tier binaries on NATS and Redis over real TLS with credentials, configured
//! by their flags and environment as the chart configures them: a `nats-server` with a
//! `tls {}` block (client certificates required) and a user, a `redis-server` on
//! `--tls-port` only with an ACL user, certificates made at test time. Config from a
//! directory reaches a real Envoy over ADS; no tier logs a password.

use crate::scenario;
use crate::support::envoy::XdsApi;
use crate::support::process::wait_http_ok;
use crate::support::tiers;
use shoal_infra::testing::{NatsServer, RedisServer, ServerTls};
use shoal_test_support::tls::TestPki;
use std::time::Duration;

const NATS_PASSWORD: &str = "nats-Pa55-e2e";
const REDIS_PASSWORD: &str = "redis-Pa55-e2e";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_tiers_on_tls_nats_and_redis_with_credentials_route_envoy() {
    let _serial = crate::SERIAL.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config_dir = dir.path().join("config");
    let fixture = scenario::Fixture::new(&config_dir).await;
    let pki = TestPki::new("e2e transport CA");
    let tls = ServerTls {
        ca: pki.ca(),
        cert: pki.server_cert(),
        key: pki.server_key(),
        verify_clients: true,
    };
    let nats = NatsServer::start_secure(&tls, "shoal", NATS_PASSWORD);
    let redis = RedisServer::start_secure(&tls, "shoal", REDIS_PASSWORD);
    let path = |p: std::path::PathBuf| p.display().to_string();
    let (ca, cert, key) = (
        path(pki.ca()),
        path(pki.client_cert()),
        path(pki.client_key()),
    );
    let nats_flags = [
        "--nats-tls-ca",
        &ca,
        "--nats-tls-cert",
        &cert,
        "--nats-tls-key",
        &key,
        "--nats-user",
        "shoal",
    ];
    let redis_flags = [
        "--redis-tls-ca",
        &ca,
        "--redis-tls-cert",
        &cert,
        "--redis-tls-key",
        &key,
        "--redis-username",
        "shoal",
    ];
    // Secrets from the environment, as the chart passes them.
    let envs = [
        ("SHOAL_NATS_PASSWORD", NATS_PASSWORD.to_string()),
        ("SHOAL_REDIS_PASSWORD", REDIS_PASSWORD.to_string()),
    ];
    let (nats_url, redis_url) = (nats.secure_url(), redis.secure_url());
    let both: Vec<&str> = nats_flags.iter().chain(&redis_flags).copied().collect();
    let config = config_dir.display().to_string();
    let ingest_flags: Vec<&str> = ["--config-dir", config.as_str()]
        .into_iter()
        .chain(nats_flags)
        .collect();
    let ingest = tiers::ingest_env("cluster-1", &ingest_flags, &nats_url, &envs, dir.path());
    let builder = tiers::builder_env(1, &nats_url, &redis_url, &both, &envs, dir.path());
    let edge = tiers::edge_env(1, &nats_url, &redis_url, &both, &envs, dir.path());
    for (name, port) in [
        ("ingest", ingest.http),
        ("builder", builder.http),
        ("edge", edge.http),
    ] {
        assert!(
            wait_http_ok(
                &format!("http://127.0.0.1:{port}/healthz/ready"),
                Duration::from_secs(30)
            )
            .await,
            "{name} is not ready on TLS NATS and Redis"
        );
    }
    let ingest_http = ingest.http;
    let (mut ingest, mut builder, mut edge_proc) = (ingest.proc, builder.proc, edge.proc);
    let envoy = fixture.start_envoy(XdsApi::Sotw, &[edge.xds], dir.path());
    let mut procs = vec![&mut ingest, &mut builder, &mut edge_proc];
    let report = fixture
        .run(&envoy, &[edge.http], ingest_http, &mut procs)
        .await;
    println!("e2e three-tier over TLS NATS and Redis: {report}");
    for p in procs {
        p.assert_running();
        p.stop(Duration::from_secs(5));
        let log = std::fs::read_to_string(&p.log).unwrap_or_default();
        for secret in [NATS_PASSWORD, REDIS_PASSWORD] {
            assert!(!log.contains(secret), "a password in the log:\n{log}");
        }
    }
}
