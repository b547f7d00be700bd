//! One small loadtest against the all-in-one `shoal` binary, so the tool cannot rot:
//! 200 simulated proxies sync, then a VirtualService change and an endpoint change (SotW,
//! and Delta for the latter) must reach every proxy whose scope includes them.
//!
//! And the same over the secure port as Istio's agent connects: TLS verified against the
//! mesh root of Shoal's own CA, a JWT per namespace from the loadtest's key (the JWKS is
//! the edge's `--jwks-file`), then concurrent `CreateCertificate` calls (`loadtest ca`).
//!
//! Needs `target/<profile>/shoal`: run `cargo build --workspace --bins` first (as
//! `make test` does).

use shoal_infra::testing::free_port;
use shoal_loadtest::ca::{CaConfig, run_ca};
use shoal_loadtest::mesh::write_mesh;
use shoal_loadtest::proxy::Limits;
use shoal_loadtest::secure::{Security, SecurityConfig, keys::write_keys};
use shoal_loadtest::{ChangeKind, Lb, Report, RunConfig, run};
use shoal_test_support::meshgen::MeshSpec;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `shoal`, killed when dropped; its log is printed if the test fails.
struct Shoal {
    child: Child,
    log: PathBuf,
}

impl Drop for Shoal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            eprintln!("---- shoal log (last lines) ----");
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
        }
    }
}

/// `target/<profile>/shoal`, beside this test's `deps/` directory.
fn shoal_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let path = dir.join("shoal");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` first",
        path.display()
    );
    path
}

fn start_shoal(config_dir: &Path, xds: u16, http: u16, log_dir: &Path) -> Shoal {
    let plaintext = [
        "--plaintext-xds-addr".to_string(),
        format!("127.0.0.1:{xds}"),
        // The secure listener is always on: a free port, not 15012.
        "--secure-xds-addr".to_string(),
        "127.0.0.1:0".to_string(),
    ];
    start_shoal_with(config_dir, &plaintext, http, log_dir)
}

fn start_shoal_with(config_dir: &Path, args: &[String], http: u16, log_dir: &Path) -> Shoal {
    let log = log_dir.join("shoal.log");
    let out = std::fs::File::create(&log).expect("log");
    let child = Command::new(shoal_binary())
        .args(["--config-dir", &config_dir.display().to_string()])
        .args(args)
        .args(["--http-addr", &format!("127.0.0.1:{http}")])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .expect("start shoal");
    Shoal { child, log }
}

/// Whether `GET /healthz/ready` answers 200 within `timeout`.
#[expect(
    clippy::disallowed_methods,
    reason = "blocks only the test's own task, before it has spawned anything"
)]
fn wait_ready(port: u16, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut reply = String::new();
            if s.write_all(b"GET /healthz/ready HTTP/1.0\r\nHost: x\r\n\r\n")
                .is_ok()
                && s.read_to_string(&mut reply).is_ok()
                && reply.split_whitespace().nth(1) == Some("200")
            {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn check(report: &Report) {
    check_n(report, 200);
}

fn check_n(report: &Report, n: usize) {
    println!("{report}");
    assert_eq!(report.connected, n, "connected");
    assert_eq!(report.synced, n, "synced");
    assert!(report.initial_sync_s.is_some());
    assert!(report.proxies_expected > 0, "the change concerns someone");
    assert_eq!(
        report.proxies_pushed - report.proxies_pushed_unexpected,
        report.proxies_expected,
        "every proxy that should get the change converged"
    );
    assert_eq!(report.nacks, 0, "nacks");
    assert_eq!(report.errors, 0, "errors");
    let p = report.convergence_ms.expect("convergence measured");
    assert!(p.p99 < 5000.0, "convergence p99 {} ms", p.p99);
    assert!(!report.timed_out);
    assert!(report.edges[0].peak_rss_kib > 0, "edge memory read");
    // Proxies of a scope get the same bytes: each distinct response is decoded once.
    let v = report.verify_cache;
    assert!(v.hits > 0 && v.misses > 0, "{v:?}");
    assert!(v.hits + v.misses <= report.responses, "{v:?}");
    assert!(v.misses < report.responses / 2, "{v:?}");
    assert!(report.per_proxy.loadtest.peak_rss_kib > 0.0);
    assert!(report.per_proxy.edges.peak_rss_kib > 0.0);
    assert!(report.summary().starts_with(&format!("synced {n}/{n} ")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_proxies_against_shoal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mesh_dir = dir.path().join("mesh");
    let spec = MeshSpec {
        services: 50,
        endpoints_per_service: 5,
        namespaces: 5,
        ..MeshSpec::default()
    };
    write_mesh(&spec, &mesh_dir).expect("write mesh");
    let (xds, http) = (free_port(), free_port());
    let shoal = start_shoal(&mesh_dir, xds, http, dir.path());
    assert!(wait_ready(http, Duration::from_secs(30)), "shoal not ready");

    // Last, the proxies as the mesh's endpoints: the change moves one's own address.
    for (change, delta, as_endpoints) in [
        (ChangeKind::Vs, false, false),
        (ChangeKind::Endpoint, false, false),
        (ChangeKind::Endpoint, true, false),
        (ChangeKind::Endpoint, false, true),
    ] {
        let report = run(RunConfig {
            xds_addrs: vec![format!("127.0.0.1:{xds}")],
            proxies: 200,
            as_endpoints,
            delta,
            change,
            config_dir: Some(mesh_dir.clone()),
            edge_pids: vec![shoal.child.id()],
            timeout: Duration::from_secs(20),
            settle: Duration::from_millis(200),
            ..RunConfig::default()
        })
        .await
        .expect("loadtest run");
        check(&report);
        if change == ChangeKind::Endpoint {
            assert_eq!(
                report.pushes_unneeded, 0,
                "an endpoint change reaches only the proxies whose scope includes the service"
            );
        }
    }
    // A random spread over two addresses, one of which refuses connections (an edge that
    // is down): every proxy skips it and syncs at the other, and no proxy ever sees an
    // older snapshot.
    let dead = free_port();
    let report = run(RunConfig {
        xds_addrs: vec![format!("127.0.0.1:{xds}"), format!("127.0.0.1:{dead}")],
        proxies: 200,
        delta: true,
        change: ChangeKind::Vs,
        lb: Lb::Random,
        config_dir: Some(mesh_dir.clone()),
        edge_pids: vec![shoal.child.id()],
        timeout: Duration::from_secs(30),
        settle: Duration::from_millis(200),
        hold: Duration::from_millis(200),
        limits: Limits {
            backoff: Duration::from_millis(50),
            ..Limits::default()
        },
        ..RunConfig::default()
    })
    .await
    .expect("loadtest run");
    assert_eq!(report.synced, 200, "synced");
    assert_eq!(report.final_connected, 200, "connected at the end");
    assert!(
        report.reconnects > 0,
        "some streams tried the dead address first"
    );
    assert_eq!(report.version_regressions, 0);
    assert_eq!(report.nacks, 0);
    assert!(!report.timed_out);
    assert!(report.time_to_first_response_ms.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_with_tokens_against_shoal_and_its_ca() {
    const ISSUER: &str = "https://loadtest.test";
    let dir = tempfile::tempdir().expect("tempdir");
    let mesh_dir = dir.path().join("mesh");
    let spec = MeshSpec {
        services: 20,
        endpoints_per_service: 2,
        namespaces: 4,
        ..MeshSpec::default()
    };
    write_mesh(&spec, &mesh_dir).expect("write mesh");
    let (key, jwks, ca_dir) = (
        dir.path().join("jwt-key.pem"),
        dir.path().join("jwks.json"),
        dir.path().join("ca"),
    );
    write_keys(&key, &jwks).expect("loadtest keys");
    let (secure, http) = (free_port(), free_port());
    let path = |p: &Path| p.display().to_string();
    let args = [
        "--secure-xds-addr".to_string(),
        format!("127.0.0.1:{secure}"),
        "--ca-root-dir".into(),
        path(&ca_dir),
        "--jwt-issuer".into(),
        ISSUER.into(),
        "--jwks-file".into(),
        path(&jwks),
    ];
    let shoal = start_shoal_with(&mesh_dir, &args, http, dir.path());
    assert!(wait_ready(http, Duration::from_secs(30)), "shoal not ready");
    let root = ca_dir.join("ca-cert.pem");
    assert!(
        root.exists(),
        "shoal keeps its self-signed root in --ca-root-dir"
    );
    let addr = format!("127.0.0.1:{secure}");
    let security = |jwt_key: Option<&Path>| {
        Security::load(&SecurityConfig {
            tls_ca: Some(root.clone()),
            tls_server_name: None,
            jwt_key: jwt_key.map(Path::to_path_buf),
            jwt_issuer: Some(ISSUER.into()),
        })
        .expect("security")
    };

    // Every proxy syncs and converges over TLS, each stream with its namespace's token.
    let report = run(RunConfig {
        xds_addrs: vec![addr.clone()],
        proxies: 100,
        change: ChangeKind::Vs,
        config_dir: Some(mesh_dir.clone()),
        edge_pids: vec![shoal.child.id()],
        timeout: Duration::from_secs(20),
        settle: Duration::from_millis(200),
        security: security(Some(&key)),
        ..RunConfig::default()
    })
    .await
    .expect("loadtest run over TLS with tokens");
    check_n(&report, 100);

    // Without a token the secure port serves nothing: the flags are what let them in.
    let anonymous = run(RunConfig {
        xds_addrs: vec![addr.clone()],
        proxies: 10,
        timeout: Duration::from_secs(3),
        security: security(None),
        limits: Limits {
            max_attempts: Some(1),
            ..Limits::default()
        },
        ..RunConfig::default()
    })
    .await
    .expect("a run that reports its failures");
    assert_eq!(anonymous.synced, 0, "{anonymous}");
    assert!(anonymous.errors > 0, "{anonymous}");

    // The CA issues each caller a certificate for its own identity.
    let ca = run_ca(CaConfig {
        addr,
        callers: 50,
        conns: Some(10),
        edge_pids: vec![shoal.child.id()],
        timeout: Duration::from_secs(20),
        security: security(Some(&key)),
        ..CaConfig::default()
    })
    .await
    .expect("loadtest ca");
    println!("{ca}");
    assert_eq!((ca.issued, ca.errors), (50, 0), "{ca}");
    assert!(ca.latency_ms.is_some_and(|p| p.count == 50));
}

/// An edge killed under its proxies (`--lb spread`): each proxy it served reconnects to
/// the next ready edge and is served again, and the run says how fast. Before spread
/// failed over, those proxies kept dialling the dead edge and the hold never ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_edges_proxies_are_served_again_elsewhere() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mesh_dir = dir.path().join("mesh");
    let spec = MeshSpec {
        services: 20,
        endpoints_per_service: 2,
        namespaces: 4,
        ..MeshSpec::default()
    };
    write_mesh(&spec, &mesh_dir).expect("write mesh");
    let (xds_a, http_a, xds_b, http_b) = (free_port(), free_port(), free_port(), free_port());
    let (dir_a, dir_b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&dir_a).expect("dir a");
    std::fs::create_dir_all(&dir_b).expect("dir b");
    let mut a = start_shoal(&mesh_dir, xds_a, http_a, &dir_a);
    let b = start_shoal(&mesh_dir, xds_b, http_b, &dir_b);
    assert!(
        wait_ready(http_a, Duration::from_secs(30)),
        "shoal a not ready"
    );
    assert!(
        wait_ready(http_b, Duration::from_secs(30)),
        "shoal b not ready"
    );

    let (phases_tx, mut phases) = tokio::sync::watch::channel("");
    let (released_tx, released) = tokio::sync::watch::channel(false);
    let killer = tokio::spawn(async move {
        let _ = phases.wait_for(|p| *p == "hold").await;
        let _ = a.child.kill();
        let _ = a.child.wait();
        // Long enough for every proxy of `a` to notice and go to `b`.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let _ = released_tx.send(true);
        a
    });
    let report = run(RunConfig {
        xds_addrs: vec![format!("127.0.0.1:{xds_a}"), format!("127.0.0.1:{xds_b}")],
        proxies: 100,
        conns: Some(4),
        config_dir: Some(mesh_dir.clone()),
        edge_pids: vec![b.child.id()],
        timeout: Duration::from_secs(30),
        hold: Duration::from_secs(30),
        phases: Some(std::sync::Arc::new(phases_tx)),
        hold_released: Some(released),
        resync_within: Some(Duration::from_secs(20)),
        limits: Limits {
            backoff: Duration::from_millis(50),
            ..Limits::default()
        },
        ..RunConfig::default()
    })
    .await
    .expect("loadtest run");
    let _a = killer.await.expect("killer");
    println!("{report}");
    assert_eq!(report.synced, 100, "synced");
    assert_eq!(report.final_connected, 100, "every proxy connected again");
    // Half the proxies were on `a` (connections alternate between the edges).
    let r = &report.resync;
    assert_eq!((r.streams_lost, r.served_again), (50, 50), "{r:?}");
    assert!(r.window_ms.is_some() && r.gap_ms.is_some_and(|g| g.count == 50));
    // The ends came before the last proxy was served again.
    assert!(
        r.ended_over_ms.is_some_and(|e| Some(e) <= r.window_ms),
        "{r:?}"
    );
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert!(
        report.summary().contains(" served_again 50/50 "),
        "{}",
        report.summary()
    );
}
