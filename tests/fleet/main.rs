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
//!
//! After each fault the test measures how long the fleet took to serve again: every proxy
//! served after an edge fault, and for the others a new service, written while the
//! component was down, served by every live edge (timed from the component's return).
//! `SHOAL_FLEET_PROXIES=1500 cargo test --release -p shoal --test fleet -- --nocapture` is
//! the full run recorded in BENCHMARKS.md; CI runs 300 proxies.
//!
//! [`storm`]: a connection storm on fresh tiers, several rounds. [`proxy_status`]:
//! `shoal proxy-status` over two edges' proxies.

#[path = "../support/mod.rs"]
mod support;

mod proxy_status;
mod storm;

use shoal_infra::testing::{NatsServer, RedisServer};
use shoal_loadtest::mesh::write_mesh;
use shoal_loadtest::proxy::Limits;
use shoal_loadtest::{ChangeKind, Lb, RunConfig, Storm, run};
use shoal_test_support::meshgen::MeshSpec;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::process::{Proc, wait_http_ok};
use support::tiers::{self, Edge};

/// Proxies in the run: `SHOAL_FLEET_PROXIES`, else 300 (the CI variant; BENCHMARKS.md
/// records the full run with 1,500).
fn fleet_proxies() -> usize {
    std::env::var("SHOAL_FLEET_PROXIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

/// Timestamped steps, printed at the end.
struct Log {
    started: Instant,
    lines: Vec<String>,
}

impl Log {
    fn new() -> Log {
        Log {
            started: Instant::now(),
            lines: Vec::new(),
        }
    }

    fn at(&mut self, what: &str) {
        let t = self.started.elapsed().as_secs_f64();
        self.lines.push(format!("{t:>5.1} s  {what}"));
    }
}

/// How long the fleet took to serve again after a fault.
struct Recovery {
    fault: &'static str,
    /// When the clock started.
    from: &'static str,
    served: Duration,
}

/// `pilot_xds` of each edge (0 for one that does not answer).
async fn pilot_xds(edges: &[Edge]) -> Vec<usize> {
    let mut shares = Vec::new();
    for e in edges {
        shares.push(metric(e.http, "pilot_xds").await.unwrap_or(0.0) as usize);
    }
    shares
}

/// `shoal_xds_handoffs` summed over the edges that answer.
async fn handoffs(edges: &[Edge]) -> usize {
    let mut total = 0;
    for e in edges {
        total += metric(e.http, "shoal_xds_handoffs_total")
            .await
            .unwrap_or(0.0) as usize;
    }
    total
}

/// Proxies served by an edge that does not own them (`foreign` in `/debug/ring`): they
/// landed there while their owner could not be reached, and move home at the next ring
/// change.
async fn away_from_owner(edges: &[Edge]) -> usize {
    let mut total = 0;
    for e in edges {
        let url = format!("http://127.0.0.1:{}/debug/ring", e.http);
        let ring: Option<serde_json::Value> = match reqwest::get(url).await {
            Ok(resp) => resp.json().await.ok(),
            Err(_) => None,
        };
        total += ring.and_then(|r| r["foreign"].as_u64()).unwrap_or(0) as usize;
    }
    total
}

/// Time until the edges not in `gone` generate config for all `proxies` together.
async fn all_served(edges: &[Edge], gone: &[usize], proxies: usize) -> Duration {
    let since = Instant::now();
    while since.elapsed() < Duration::from_secs(60) {
        let shares = pilot_xds(edges).await;
        let served: usize = shares
            .iter()
            .enumerate()
            .filter(|(i, _)| !gone.contains(i))
            .map(|(_, n)| n)
            .sum();
        if served >= proxies {
            return since.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the live edges never served all {proxies} proxies again");
}

/// The ADS addresses of the edges not in `gone`.
fn live_addrs(edges: &[Edge], gone: &[usize]) -> Vec<String> {
    edges
        .iter()
        .enumerate()
        .filter(|(i, _)| !gone.contains(i))
        .map(|(_, e)| format!("127.0.0.1:{}", e.xds))
        .collect()
}

/// A change no proxy has seen: a new service `probe-<n>` in `ns-0`. Returns its cluster.
fn write_probe_service(mesh_dir: &Path, n: usize) -> String {
    let name = format!("probe-{n}");
    let yaml = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: ns-0\n\
         spec:\n  ports:\n  - name: http\n    port: 8080\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n\
         \x20 namespace: ns-0\n  labels:\n    kubernetes.io/service-name: {name}\n\
         addressType: IPv4\nports:\n- name: http\n  port: 9080\nendpoints:\n\
         - addresses: [10.99.0.{n}]\n  conditions: {{ready: true}}\n"
    );
    let path = mesh_dir.join("ns-0").join(format!("{name}.yaml"));
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, yaml).expect("write probe service");
    std::fs::rename(&tmp, &path).expect("rename probe service");
    format!("outbound|8080||{name}.ns-0.svc.cluster.local")
}

/// Time from `since` until a new proxy in `ns-0` on each of `addrs` receives `cluster`.
async fn served_everywhere(addrs: &[String], cluster: &str, since: Instant) -> Duration {
    for addr in addrs {
        shoal_loadtest::run::wait_for_cluster(
            addr,
            "ns-0",
            cluster,
            Duration::from_secs(60),
            // Plaintext, as the fleet's loadtest.
            &Default::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }
    since.elapsed()
}

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

/// The storm's mesh (40 services of 4 endpoints in 4 namespaces), written under `dir`.
fn small_mesh(dir: &Path) -> (std::path::PathBuf, shoal_test_support::meshgen::Mesh) {
    let spec = MeshSpec {
        services: 40,
        endpoints_per_service: 4,
        namespaces: 4,
        ..MeshSpec::default()
    };
    let mesh_dir = dir.join("mesh");
    write_mesh(&spec, &mesh_dir).expect("write mesh");
    (mesh_dir, shoal_test_support::meshgen::Mesh::generate(&spec))
}

/// Edge `n`; proxies served away from their owner go home quickly in this test.
fn edge(n: usize, nats: &str, redis: &str, dir: &Path) -> Edge {
    tiers::edge(n, nats, redis, &["--rehome-interval", "2s"], dir)
}

fn builder(n: usize, nats: &str, redis: &str, dir: &Path) -> Proc {
    tiers::builder(n, nats, redis, dir).proc
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_survives_any_single_failure() {
    let proxies = fleet_proxies();
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
    let start_ingest = || tiers::ingest(&mesh_dir, &nats_url, dir.path()).proc;
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

    // The faults, one at a time, while every proxy holds its stream; after each, how
    // long until the fleet serves again (`Recovery`).
    let (phase_tx, mut phase) = tokio::sync::watch::channel("");
    let (release_hold, hold_released) = tokio::sync::watch::channel(false);
    let faults = async {
        let mut log = Log::new();
        let mut recoveries = Vec::new();
        let mut probes = 0;
        let mut probe = |mesh_dir: &Path| {
            probes += 1;
            write_probe_service(mesh_dir, probes)
        };
        phase
            .wait_for(|p| *p == "change")
            .await
            .expect("loadtest running");
        tokio::time::sleep(Duration::from_secs(1)).await;
        log.at("SIGKILL builder-1 mid-storm");
        builders[0].kill();
        let killed = Instant::now();
        let cluster = probe(&mesh_dir);
        recoveries.push(Recovery {
            fault: "SIGKILL builder-1 mid-storm",
            from: "the kill (the other builder builds)",
            served: served_everywhere(&live_addrs(&edges, &[]), &cluster, killed).await,
        });
        phase
            .wait_for(|p| *p == "hold")
            .await
            .expect("loadtest running");
        // A 4th edge joins: the ring gives it a quarter of the proxies, which the others
        // hand off at a pace and relay to it.
        let handoffs_before = handoffs(&edges).await;
        let away_before = away_from_owner(&edges).await;
        log.at("edge-4 started");
        let joined = Instant::now();
        edges.push(edge(4, &nats_url, &redis_url, dir.path()));
        let (low, high) = (proxies / 5, proxies * 3 / 10);
        let mut shares = Vec::new();
        while joined.elapsed() < Duration::from_secs(30) {
            shares = pilot_xds(&edges).await;
            if (low..=high).contains(&shares[3]) && shares.iter().sum::<usize>() == proxies {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let balanced = joined.elapsed();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let moved = handoffs(&edges).await - handoffs_before;
        log.at(&format!(
            "pilot_xds per edge {shares:?} after {:.1} s; {moved} proxies handed off \
             ({:.1}% of all, {} to edge-4; {away_before} were served away from their owner \
             before the join)",
            balanced.as_secs_f64(),
            100.0 * moved as f64 / proxies as f64,
            shares[3]
        ));
        assert!(
            (low..=high).contains(&shares[3]),
            "edge-4 took 25% ± 5 of {proxies} proxies: {shares:?}"
        );
        recoveries.push(Recovery {
            fault: "edge-4 joins (3 → 4 edges)",
            from: "its start, until its share is in place",
            served: balanced,
        });

        log.at("SIGKILL edge-1");
        edges[0].proc.kill();
        let back = all_served(&edges, &[0], proxies).await;
        log.at(&format!(
            "every proxy served again after {:.1} s",
            back.as_secs_f64()
        ));
        recoveries.push(Recovery {
            fault: "SIGKILL edge-1",
            from: "the kill, until every proxy is served again",
            served: back,
        });
        let cluster = probe(&mesh_dir);
        let changed = Instant::now();
        recoveries.push(Recovery {
            fault: "  then a change",
            from: "its write",
            served: served_everywhere(&live_addrs(&edges, &[0]), &cluster, changed).await,
        });

        log.at("SIGTERM edge-2 (drain)");
        let drained = Instant::now();
        edges[1].proc.stop(Duration::from_secs(15));
        let exited = drained.elapsed();
        log.at(&format!(
            "edge-2 exited after {:.1} s",
            exited.as_secs_f64()
        ));
        let drain_log = std::fs::read_to_string(&edges[1].proc.log).unwrap_or_default();
        assert!(
            drain_log.contains("hand-off done"),
            "edge-2 handed its proxies off before exiting:\n{}",
            edges[1].proc.tail(30)
        );
        let back = all_served(&edges, &[0, 1], proxies).await.max(exited);
        recoveries.push(Recovery {
            fault: "SIGTERM edge-2 (drain)",
            from: "SIGTERM, until every proxy is served again",
            served: back,
        });
        let gone = [0, 1];

        // The rest: a change is made while the component is down; the clock starts when
        // it is back.
        log.at("Redis stopped");
        redis.stop();
        let cluster = probe(&mesh_dir);
        tokio::time::sleep(Duration::from_secs(2)).await;
        log.at("Redis started again, empty");
        redis.start_again();
        let back = Instant::now();
        recoveries.push(Recovery {
            fault: "Redis restarted empty",
            from: "Redis back (a change made while it was down)",
            served: served_everywhere(&live_addrs(&edges, &gone), &cluster, back).await,
        });

        log.at("NATS stopped");
        nats.stop();
        let cluster = probe(&mesh_dir);
        tokio::time::sleep(Duration::from_secs(2)).await;
        log.at("NATS started again on its storage");
        nats.start_again();
        let back = Instant::now();
        recoveries.push(Recovery {
            fault: "NATS restarted",
            from: "NATS back (a change made while it was down)",
            served: served_everywhere(&live_addrs(&edges, &gone), &cluster, back).await,
        });

        log.at("SIGKILL ingest");
        ingest.kill();
        let cluster = probe(&mesh_dir);
        tokio::time::sleep(Duration::from_secs(1)).await;
        log.at("ingest started again");
        ingest = start_ingest();
        let back = Instant::now();
        recoveries.push(Recovery {
            fault: "SIGKILL ingest",
            from: "ingest started again (a change made while it was down)",
            served: served_everywhere(&live_addrs(&edges, &gone), &cluster, back).await,
        });
        // Every proxy ends on its owner: those served away from it (their owner was
        // unreachable, or dead but still in the ring, when they connected) are sent home
        // by the next ring change or re-home pass.
        let homed = Instant::now();
        loop {
            let away = away_from_owner(&edges[2..]).await;
            if away == 0 {
                break;
            }
            if homed.elapsed() > Duration::from_secs(15) {
                let mut rings = String::new();
                for e in &edges[2..] {
                    let url = format!("http://127.0.0.1:{}/debug/ring", e.http);
                    if let Ok(resp) = reqwest::get(url).await {
                        rings.push_str(&resp.text().await.unwrap_or_default());
                        rings.push('\n');
                    }
                }
                panic!("{away} proxies still served away from their owner; /debug/ring:\n{rings}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        log.at(&format!(
            "every proxy on its owner {:.1} s later",
            homed.elapsed().as_secs_f64()
        ));
        assert_eq!(
            *phase.borrow(),
            "hold",
            "the faults outlasted the loadtest's hold: raise it"
        );
        release_hold.send_replace(true);
        (log.lines, recoveries)
    };
    let load = run(RunConfig {
        xds_addrs: xds_addrs.clone(),
        proxies,
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
        // Ended by the faults once they are done.
        hold: Duration::from_secs(120),
        hold_released: Some(hold_released),
        limits: Limits {
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            ..Limits::default()
        },
        phases: Some(Arc::new(phase_tx)),
        ..RunConfig::default()
    });
    let (report, (log, recoveries)) = tokio::join!(load, faults);
    let report = report.expect("loadtest run");
    eprintln!("faults:\n{}\n{report}", log.join("\n"));
    eprintln!("recovery ({proxies} proxies):");
    for r in &recoveries {
        eprintln!(
            "  {:<30} {:>6.2} s  from {}",
            r.fault,
            r.served.as_secs_f64(),
            r.from
        );
    }
    assert_eq!(report.synced, proxies, "every proxy synced");
    assert_eq!(
        report.final_connected, proxies,
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
