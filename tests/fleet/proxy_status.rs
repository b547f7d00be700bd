//! `shoal proxy-status` across two edges while the loadtest's proxies hold their streams:
//! every proxy listed once, each type SYNCED, and how long the answer took.
//!
//! `SHOAL_PROXY_STATUS_PROXIES` (default 1,000) sizes it; BENCHMARKS.md records 10,000.

use super::{edge, pilot_xds, small_mesh};
use shoal_infra::testing::{NatsServer, RedisServer};
use shoal_loadtest::run::change::cluster_name;
use shoal_loadtest::{Lb, RunConfig, run};
use std::path::Path;
use std::time::{Duration, Instant};
use support::process::wait_http_ok;
use support::tiers;

use super::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_status_lists_every_proxy_of_two_edges() {
    let proxies = std::env::var("SHOAL_PROXY_STATUS_PROXIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000usize);
    let dir = tempfile::tempdir().expect("tempdir");
    let (mesh_dir, mesh) = small_mesh(dir.path());
    let last = mesh.services.last().expect("a service");
    let nats = NatsServer::start();
    let redis = RedisServer::start();
    let (nats_url, redis_url) = (nats.url(), redis.url());
    let _ingest = tiers::ingest(&mesh_dir, &nats_url, dir.path());
    let _builder = tiers::builder(1, &nats_url, &redis_url, dir.path());
    let edges = [1, 2].map(|n| edge(n, &nats_url, &redis_url, dir.path()));
    for e in &edges {
        let ready = format!("http://127.0.0.1:{}/healthz/ready", e.http);
        assert!(
            wait_http_ok(&ready, Duration::from_secs(60)).await,
            "{}",
            e.proc.tail(30)
        );
    }
    let xds_addrs: Vec<String> = edges
        .iter()
        .map(|e| format!("127.0.0.1:{}", e.xds))
        .collect();
    shoal_loadtest::run::wait_for_cluster(
        &xds_addrs[0],
        &last.namespace,
        &cluster_name(last),
        Duration::from_secs(60),
        &Default::default(),
    )
    .await
    .expect("the mesh is served");

    let loadtest = run(RunConfig {
        xds_addrs,
        proxies,
        lb: Lb::Spread,
        config_dir: Some(mesh_dir.clone()),
        timeout: Duration::from_secs(120),
        settle: Duration::ZERO,
        // Held while proxy-status asks.
        hold: Duration::from_secs(10),
        ..RunConfig::default()
    });
    let admin = edges
        .iter()
        .map(|e| format!("127.0.0.1:{}", e.http))
        .collect::<Vec<_>>()
        .join(",");
    let ask = async {
        // Every proxy connected to its owner (relays settled) and synced.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let connected: usize = pilot_xds(&edges).await.iter().sum();
            if connected == proxies {
                let (out, took) = proxy_status(&admin).await;
                if out.status.code() == Some(0) {
                    return (out, took);
                }
            }
            assert!(Instant::now() < deadline, "never all connected and synced");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    let (report, (out, took)) = tokio::join!(loadtest, ask);
    let report = report.expect("loadtest run");
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = rows.as_array().expect("rows");
    assert_eq!(rows.len(), proxies, "one row per proxy");
    let mut ids: Vec<&str> = rows.iter().map(|r| r["proxy"].as_str().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), proxies, "no proxy listed twice");
    for r in rows {
        for t in ["cds", "lds", "eds", "rds"] {
            assert_eq!(r[t], "SYNCED", "{r:#}");
        }
        assert!(r["edge"] == "edge-1" || r["edge"] == "edge-2", "{r:#}");
        assert!(r["revision"].as_u64().is_some(), "{r:#}");
    }
    eprintln!(
        "shoal proxy-status: {proxies} proxies over 2 edges answered in {:.0} ms",
        took.as_secs_f64() * 1000.0
    );
}

/// `shoal proxy-status --edges ADMIN -o json`, and how long it took.
async fn proxy_status(admin: &str) -> (std::process::Output, Duration) {
    let started = Instant::now();
    let out = tokio::process::Command::new(Path::new(env!("CARGO_BIN_EXE_shoal")))
        .args(["proxy-status", "--edges", admin, "-o", "json"])
        .output()
        .await
        .expect("shoal proxy-status runs");
    (out, started.elapsed())
}
