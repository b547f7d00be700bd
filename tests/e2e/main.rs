//! End to end on real components: Istio YAML in a directory → Shoal → a real Envoy
//! routing real HTTP between two backends. Run once with the three tiers as separate
//! processes joined by real NATS and Redis, once with the all-in-one `shoal`.

#[path = "../support/mod.rs"]
mod support;

mod gateway_secrets;
mod kubernetes;
mod multicluster;
mod scenario;
mod secure_transport;

use shoal_infra::testing::{NatsServer, RedisServer};
use std::path::Path;
use std::time::{Duration, Instant};
use support::envoy::XdsApi;
use support::free_port;
use support::process::{Proc, wait_http_ok};
use support::tiers::{self, Edge};

/// The end-to-end tests measure timings: run them one at a time on a 2-core machine.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Ingest, a builder and `edges` edges as separate processes on real NATS and Redis.
struct Tiers {
    ingest: Proc,
    ingest_http: u16,
    builder: Proc,
    edges: Vec<Edge>,
}

impl Tiers {
    async fn start(
        config_dir: &Path,
        nats: &NatsServer,
        redis: &RedisServer,
        edges: usize,
        dir: &Path,
    ) -> Tiers {
        let ingest = tiers::ingest(config_dir, &nats.url(), dir);
        // Logs as a log collector takes them (the other tiers keep text).
        let builder = tiers::builder_env(
            1,
            &nats.url(),
            &redis.url(),
            &["--log-format", "json"],
            &[],
            dir,
        );
        let edges: Vec<Edge> = (1..=edges)
            .map(|n| tiers::edge(n, &nats.url(), &redis.url(), &[], dir))
            .collect();
        let admin_ports = [ingest.http, builder.http]
            .into_iter()
            .chain(edges.iter().map(|e| e.http));
        for port in admin_ports {
            assert!(
                wait_http_ok(
                    &format!("http://127.0.0.1:{port}/healthz/ready"),
                    Duration::from_secs(30)
                )
                .await,
                "the tier with admin port {port} is not ready"
            );
        }
        Tiers {
            ingest: ingest.proc,
            ingest_http: ingest.http,
            builder: builder.proc,
            edges,
        }
    }

    fn procs(&mut self) -> Vec<&mut Proc> {
        [&mut self.ingest, &mut self.builder]
            .into_iter()
            .chain(self.edges.iter_mut().map(|e| &mut e.proc))
            .collect()
    }

    fn stop(mut self) {
        for p in self.procs() {
            p.assert_running();
            p.stop(Duration::from_secs(5));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_tiers_with_nats_and_redis_route_envoy() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config_dir = dir.path().join("config");
    let fixture = scenario::Fixture::new(&config_dir).await;
    let (nats, redis) = (NatsServer::start(), RedisServer::start());
    let mut tiers = Tiers::start(&config_dir, &nats, &redis, 1, dir.path()).await;
    let edge = (tiers.edges[0].xds, tiers.edges[0].http);
    let envoy = fixture.start_envoy(XdsApi::Sotw, &[edge.0], dir.path());
    let report = fixture
        .run(&envoy, &[edge.1], tiers.ingest_http, &mut tiers.procs())
        .await;
    println!("e2e three-tier: {report}");
    // `--log-format json`: every line the builder wrote is one JSON object.
    let log = std::fs::read_to_string(&tiers.builder.log).expect("the builder's log");
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["level"] == "INFO" && l["message"].is_string()),
        "the builder logged nothing:\n{log}"
    );
    // `shoal status` finds the edge through NATS (its announced address, the admin
    // port given) and the latest revision converged there, Envoy having ACKed it.
    let status = tokio::process::Command::new(env!("CARGO_BIN_EXE_shoal"))
        .args(["status", "--nats-url", &nats.url(), "--admin-port"])
        .arg(edge.1.to_string())
        .args(["--wait", "--timeout", "20s", "-o", "json"])
        .output()
        .await
        .expect("shoal status runs");
    let shown = String::from_utf8_lossy(&status.stdout);
    assert_eq!(
        status.status.code(),
        Some(0),
        "{shown}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let answer: serde_json::Value = serde_json::from_str(&shown).expect("JSON");
    assert_eq!(answer["edges"][0]["edge"], "edge-1", "{answer:#}");
    assert_eq!(answer["verdict"], "converged", "{answer:#}");
    tiers.stop();
}

/// A Delta Envoy behind two edges (its ADS cluster lists both, as behind a Service):
/// the whole scenario, then its edge drains (SIGTERM) while requests flow. Envoy moves
/// to the other edge, keeps its listeners and routes, no request fails, and the next
/// edit reaches it through the new edge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_envoy_survives_a_drain_of_its_edge() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config_dir = dir.path().join("config");
    let fixture = scenario::Fixture::new(&config_dir).await;
    let (nats, redis) = (NatsServer::start(), RedisServer::start());
    let mut tiers = Tiers::start(&config_dir, &nats, &redis, 2, dir.path()).await;
    let xds_ports: Vec<u16> = tiers.edges.iter().map(|e| e.xds).collect();
    let edge_https: Vec<u16> = tiers.edges.iter().map(|e| e.http).collect();
    let envoy = fixture.start_envoy(XdsApi::Delta, &xds_ports, dir.path());
    let report = fixture
        .run(&envoy, &edge_https, tiers.ingest_http, &mut tiers.procs())
        .await;
    println!("e2e Delta Envoy, two edges: {report}");

    // Drain the edge Envoy's stream is on while requests flow.
    let first = envoy.xds_port().await.expect("Envoy holds an ADS stream");
    let drained = tiers
        .edges
        .iter()
        .position(|e| e.xds == first)
        .expect("Envoy's ADS server is one of the edges");
    // Requests run until a second after Envoy is on the other edge.
    let done = std::sync::atomic::AtomicBool::new(false);
    let requests = async {
        let client = scenario::Fixture::client();
        let (mut ok, mut failed) = (0usize, Vec::new());
        while !done.load(std::sync::atomic::Ordering::Relaxed) {
            match fixture.get(&client, None).await {
                Ok(_) => ok += 1,
                Err(e) => failed.push(e),
            }
        }
        (ok, failed)
    };
    let edge = &mut tiers.edges[drained].proc;
    let drain = async {
        let sigterm = Instant::now();
        edge.terminate();
        while !edge.exited() {
            assert!(
                sigterm.elapsed() < Duration::from_secs(15),
                "the edge did not exit within its drain grace"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let exited = sigterm.elapsed();
        let moved = loop {
            match envoy.xds_port().await {
                Some(port) if port != first => break sigterm.elapsed(),
                _ => {}
            }
            assert!(
                sigterm.elapsed() < Duration::from_secs(15),
                "Envoy did not reconnect to the other edge:\n{}",
                envoy.proc.tail(40)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (exited, moved)
    };
    let ((ok, failed), (exited, moved)) = tokio::join!(requests, drain);
    assert!(
        failed.is_empty(),
        "{} of {} requests failed during the drain: {:?}",
        failed.len(),
        ok + failed.len(),
        &failed[..failed.len().min(5)]
    );
    assert!(ok > 0, "requests flowed during the drain");
    let log = std::fs::read_to_string(&tiers.edges[drained].proc.log).unwrap_or_default();
    assert!(
        log.contains("hand-off done"),
        "the edge handed Envoy off before exiting:\n{}",
        tiers.edges[drained].proc.tail(30)
    );

    // The next edit reaches Envoy through the edge it moved to: everything to v1.
    std::fs::write(
        config_dir.join("routing/virtual-service.yaml"),
        support::mesh::virtual_service(100),
    )
    .expect("edit");
    let client = scenario::Fixture::client();
    let written = Instant::now();
    let mut streak = 0;
    while streak < 20 {
        match fixture.get(&client, None).await.as_deref() {
            Ok("v1") => streak += 1,
            Ok(_) => streak = 0,
            Err(e) => panic!("request failed after the drain: {e}"),
        }
        assert!(
            written.elapsed() < Duration::from_secs(10),
            "the edit after the drain did not reach Envoy"
        );
    }
    assert!(
        envoy.stat("listener_manager.total_listeners_active").await > 0,
        "Envoy kept its listeners"
    );
    for stat in [
        "cluster_manager.cds.update_rejected",
        "listener_manager.lds.update_rejected",
    ] {
        assert_eq!(envoy.stat(stat).await, 0, "{stat}");
    }
    println!(
        "drain: the edge exited {} ms after SIGTERM, Envoy on the other edge after {} ms; \
         {ok} requests during the drain, none failed; the next edit applied after {} ms",
        exited.as_millis(),
        moved.as_millis(),
        written.elapsed().as_millis()
    );
    let survivor = &mut tiers.edges[1 - drained].proc;
    survivor.assert_running();
    tiers.edges.remove(drained);
    tiers.stop();
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
            "--plaintext-xds-addr".into(),
            format!("127.0.0.1:{xds_port}"),
            // The secure listener is always on: a free port, not 15012.
            "--secure-xds-addr".into(),
            "127.0.0.1:0".into(),
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
    let envoy = fixture.start_envoy(XdsApi::Sotw, &[xds_port], dir.path());
    let report = fixture.run(&envoy, &[http], http, &mut [&mut shoal]).await;
    println!("e2e embedded: {report}");
    shoal.assert_running();
    shoal.stop(Duration::from_secs(5));
}
