//! The fleet under faults, on real components: NATS and Redis, ingest, two builders and
//! three edges as separate processes, and simulated proxies spread at random over the
//! edges (as behind a Kubernetes Service) that reconnect and resume as Envoy does.
//!
//! A storm of 30 changes, with a builder SIGKILLed in the middle of it; then, while every
//! proxy holds its stream: a 4th edge joins and takes 25% ± 5 of the proxies (relayed to
//! it by the edges they reached); SIGKILL an edge, SIGTERM (drain) another, restart Redis empty,
//! restart NATS, SIGKILL ingest and start it again. Then every proxy is connected again with
//! the change it got, no proxy ever saw an older snapshot, and a new change made after
//! all of it reaches every proxy (nothing was lost).

#[path = "../support/mod.rs"]
mod support;

use shoal_infra::testing::{NatsServer, RedisServer};
use shoal_loadtest::mesh::write_mesh;
use shoal_loadtest::proxy::Limits;
use shoal_loadtest::{ChangeKind, Lb, RunConfig, Storm, run};
use shoal_test_support::meshgen::MeshSpec;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::process::{Proc, wait_http_ok};
use support::{free_port, workspace_binary};

const PROXIES: usize = 300;

/// A gauge or counter's value on an admin server's `/metrics`.
async fn metric(http: u16, name: &str) -> Option<f64> {
    let text = reqwest::get(format!("http://127.0.0.1:{http}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

struct Edge {
    proc: Proc,
    xds: u16,
    http: u16,
}

fn edge(n: usize, nats: &str, redis: &str, dir: &Path) -> Edge {
    let (xds, http) = (free_port(), free_port());
    let proc = Proc::spawn(
        &format!("edge-{n}"),
        &workspace_binary("edge"),
        &[
            "--nats-url".into(),
            nats.into(),
            "--redis-url".into(),
            redis.into(),
            "--xds-addr".into(),
            format!("127.0.0.1:{xds}"),
            "--http-addr".into(),
            format!("127.0.0.1:{http}"),
            "--edge-id".into(),
            format!("edge-{n}"),
        ],
        &[("RUST_LOG", "info".to_string())],
        dir,
    );
    Edge { proc, xds, http }
}

fn builder(n: usize, nats: &str, redis: &str, dir: &Path) -> Proc {
    Proc::spawn(
        &format!("builder-{n}"),
        &workspace_binary("builder"),
        &[
            "--nats-url".into(),
            nats.into(),
            "--redis-url".into(),
            redis.into(),
            "--http-addr".into(),
            format!("127.0.0.1:{}", free_port()),
        ],
        &[("RUST_LOG", "info".to_string())],
        dir,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_survives_any_single_failure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mesh_dir = dir.path().join("mesh");
    let spec = MeshSpec {
        services: 60,
        endpoints_per_service: 4,
        namespaces: 6,
        ..MeshSpec::default()
    };
    write_mesh(&spec, &mesh_dir).expect("write mesh");

    let mut nats = NatsServer::start();
    let mut redis = RedisServer::start();
    let (nats_url, redis_url) = (nats.url(), redis.url());
    let ingest_args = [
        "--config-dir".into(),
        mesh_dir.display().to_string(),
        "--cluster-id".into(),
        "cluster-1".into(),
        "--nats-url".into(),
        nats_url.clone(),
        "--http-addr".into(),
        format!("127.0.0.1:{}", free_port()),
    ];
    let start_ingest = || {
        Proc::spawn(
            "ingest",
            &workspace_binary("ingest"),
            &ingest_args,
            &[("RUST_LOG", "info".to_string())],
            dir.path(),
        )
    };
    let mut ingest = start_ingest();
    let mut builders = [
        builder(1, &nats_url, &redis_url, dir.path()),
        builder(2, &nats_url, &redis_url, dir.path()),
    ];
    let mut edges: Vec<Edge> = (1..=3)
        .map(|n| edge(n, &nats_url, &redis_url, dir.path()))
        .collect();
    for e in &edges {
        let ready = format!("http://127.0.0.1:{}/healthz/ready", e.http);
        assert!(
            wait_http_ok(&ready, Duration::from_secs(60)).await,
            "{} not ready",
            e.proc.name
        );
    }
    let xds_addrs: Vec<String> = edges
        .iter()
        .map(|e| format!("127.0.0.1:{}", e.xds))
        .collect();

    // The faults, one at a time, while every proxy holds its stream.
    let (phase_tx, mut phase) = tokio::sync::watch::channel("");
    let faults = async {
        let mut log = Vec::new();
        let started = Instant::now();
        let mut at = |what: &str| {
            log.push(format!(
                "{:>5.1} s  {what}",
                started.elapsed().as_secs_f64()
            ))
        };
        phase
            .wait_for(|p| *p == "change")
            .await
            .expect("loadtest running");
        tokio::time::sleep(Duration::from_secs(1)).await;
        at("SIGKILL builder-1 mid-storm");
        builders[0].kill();
        phase
            .wait_for(|p| *p == "hold")
            .await
            .expect("loadtest running");
        // A 4th edge joins: the ring gives it a quarter of the proxies, which the others
        // hand off at a pace and relay to it.
        at("edge-4 started");
        let joined = Instant::now();
        edges.push(edge(4, &nats_url, &redis_url, dir.path()));
        let mut shares = Vec::new();
        while joined.elapsed() < Duration::from_secs(20) {
            shares = Vec::new();
            for e in &edges {
                shares.push(metric(e.http, "pilot_xds").await.unwrap_or(0.0) as usize);
            }
            if (60..=90).contains(&shares[3]) && shares.iter().sum::<usize>() == PROXIES {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        at(&format!(
            "pilot_xds per edge {shares:?} after {:.1} s",
            joined.elapsed().as_secs_f64()
        ));
        assert!(
            (60..=90).contains(&shares[3]),
            "edge-4 took 25% ± 5 of {PROXIES} proxies: {shares:?}"
        );
        let step = Duration::from_secs(3);
        at("SIGKILL edge-1");
        edges[0].proc.kill();
        tokio::time::sleep(step).await;
        at("SIGTERM edge-2 (drain)");
        let drained = Instant::now();
        edges[1].proc.stop(Duration::from_secs(15));
        at(&format!(
            "edge-2 exited after {:.1} s",
            drained.elapsed().as_secs_f64()
        ));
        let drain_log = std::fs::read_to_string(&edges[1].proc.log).unwrap_or_default();
        assert!(
            drain_log.contains("hand-off done"),
            "edge-2 handed its proxies off before exiting:\n{}",
            edges[1].proc.tail(30)
        );
        tokio::time::sleep(step).await;
        at("Redis restarted empty");
        redis.stop();
        redis.start_again();
        tokio::time::sleep(step).await;
        at("NATS restarted");
        nats.restart();
        tokio::time::sleep(step).await;
        at("SIGKILL ingest, started again 1 s later");
        ingest.kill();
        tokio::time::sleep(Duration::from_secs(1)).await;
        ingest = start_ingest();
        log
    };
    let load = run(RunConfig {
        xds_addrs: xds_addrs.clone(),
        proxies: PROXIES,
        delta: false,
        change: ChangeKind::Storm,
        storm: Storm {
            changes: 30,
            rate: 10.0,
        },
        lb: Lb::Random,
        config_dir: Some(mesh_dir.clone()),
        timeout: Duration::from_secs(60),
        settle: Duration::from_millis(200),
        hold: Duration::from_secs(20),
        limits: Limits {
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            ..Limits::default()
        },
        phases: Some(Arc::new(phase_tx)),
        ..RunConfig::default()
    });
    let (report, log) = tokio::join!(load, faults);
    let report = report.expect("loadtest run");
    eprintln!("faults:\n{}\n{report}", log.join("\n"));
    assert_eq!(report.synced, PROXIES, "every proxy synced");
    assert_eq!(
        report.final_connected, PROXIES,
        "every proxy connected again"
    );
    // `proxies_expected` is read at the end, when a proxy still reconnecting after the
    // last fault is not counted: every proxy that should have the change has it.
    assert!(
        report.proxies_pushed - report.proxies_pushed_unexpected >= report.proxies_expected
            && report.proxies_expected > 0,
        "every proxy that should have the change has it: {} of {}",
        report.proxies_pushed - report.proxies_pushed_unexpected,
        report.proxies_expected
    );
    assert_eq!(
        report.version_regressions, 0,
        "no proxy saw an older snapshot"
    );
    assert_eq!(report.nacks, 0, "no NACK");
    assert!(
        report.reconnects > 0,
        "proxies moved off the killed and drained edges"
    );
    assert!(!report.timed_out);

    // After all of that, a new change still reaches every proxy: nothing was lost.
    let survivor = format!("127.0.0.1:{}", edges[2].xds);
    let recovered = Instant::now();
    let after = run(RunConfig {
        xds_addrs: vec![survivor],
        proxies: 100,
        change: ChangeKind::Endpoint,
        config_dir: Some(mesh_dir.clone()),
        timeout: Duration::from_secs(60),
        settle: Duration::from_millis(200),
        ..RunConfig::default()
    })
    .await
    .expect("loadtest after the faults");
    eprintln!(
        "after the faults ({:.1} s):\n{after}",
        recovered.elapsed().as_secs_f64()
    );
    assert_eq!(after.synced, 100);
    assert_eq!(
        after.proxies_pushed - after.proxies_pushed_unexpected,
        after.proxies_expected
    );
    assert!(after.proxies_expected > 0);
    assert!(!after.timed_out);
    edges[2].proc.assert_running();
    builders[1].assert_running();
    ingest.assert_running();
}
