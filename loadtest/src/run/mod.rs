//! `loadtest run`: N simulated proxies against one or more edges.
//!
//! ```text
//!  probe: each edge serves the mesh ─► connect C channels ─► spawn N proxy tasks ─► wait: every proxy synced (or --timeout)
//!  ─► write the change (temp + rename; t0 taken after the rename)
//!  ─► wait: every proxy whose scope includes it ACKed it (or --timeout), then --settle
//!  ─► stop the proxies, read /proc of the edges ─► Report
//! ```

pub mod change;
mod probe;
pub mod procfs;
mod report;

pub use change::{ChangeError, ChangeKind, Plan};
pub use probe::{ProbeError, wait_for_cluster};
pub use report::{ChangeReport, Cost, PerProxy, Percentiles, ProcReport, Report, Resync};

use crate::client::{Shared, Target};
use crate::mesh::{self, MeshError};
use crate::proxy::{self, Balancer, Lb, Limits, RunContext, Stats, Workloads, transport};
use crate::secure::Security;
use procfs::ProcSample;
use shoal_test_support::meshgen::{Mesh, namespace_name};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::Instrument;

/// A storm of changes (`--change storm`).
#[derive(Clone, Debug)]
pub struct Storm {
    /// Edits in all, the measured one included.
    pub changes: usize,
    /// Edits per second.
    pub rate: f64,
}

impl Default for Storm {
    fn default() -> Self {
        Storm {
            changes: 100,
            rate: 10.0,
        }
    }
}

/// Streams per connection when `conns` is not given.
pub const STREAMS_PER_CONN: usize = 100;

#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Edges' ADS addresses (`host:port`); connections are spread over them.
    pub xds_addrs: Vec<String>,
    pub proxies: usize,
    /// HTTP/2 connections; `None`: one per [`STREAMS_PER_CONN`] proxies.
    pub conns: Option<usize>,
    /// Namespaces proxies are spread over; `None`: the mesh's (10 without a mesh).
    pub namespaces: Option<usize>,
    /// Each proxy one of the mesh's endpoints, in its service's namespace at its
    /// address, as in a real mesh (needs `config_dir`).
    pub as_endpoints: bool,
    pub delta: bool,
    pub change: ChangeKind,
    /// The directory `loadtest mesh` wrote (and ingest or shoal serves).
    pub config_dir: Option<PathBuf>,
    pub edge_pids: Vec<u32>,
    /// Bound of each wait (initial sync, convergence).
    pub timeout: Duration,
    /// After convergence, how long to keep counting pushes.
    pub settle: Duration,
    /// After the change phase, how long to keep every proxy connected (while edges join,
    /// die or drain) before checking that each holds the final config.
    pub hold: Duration,
    /// `--change storm`: how many edits, at what rate.
    pub storm: Storm,
    pub lb: Lb,
    pub limits: Limits,
    /// Each phase as it starts, for a caller that acts at the right moment (as the
    /// `phase:` lines on stderr do for scripts).
    pub phases: Option<Arc<watch::Sender<&'static str>>>,
    /// Ends `hold` early once it holds `true` (a caller whose faults are done).
    pub hold_released: Option<watch::Receiver<bool>>,
    /// TLS and per-proxy tokens, as the agent connects to 15012 (default: plaintext).
    pub security: Security,
    /// Distinct responses whose verification is remembered (0: decode every copy).
    pub verify_cache: usize,
    /// Every proxy whose served stream ends (an edge killed) must be served again, the
    /// last within this of the first end; `None`: reported, not checked.
    pub resync_within: Option<Duration>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            xds_addrs: vec!["127.0.0.1:15010".into()],
            proxies: 100,
            conns: None,
            namespaces: None,
            as_endpoints: false,
            delta: false,
            change: ChangeKind::None,
            config_dir: None,
            edge_pids: Vec::new(),
            timeout: Duration::from_secs(120),
            settle: Duration::from_millis(500),
            hold: Duration::ZERO,
            storm: Storm::default(),
            lb: Lb::Spread,
            limits: Limits::default(),
            phases: None,
            hold_released: None,
            security: Security::default(),
            verify_cache: crate::client::verified::DEFAULT_CAPACITY,
            resync_within: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Mesh(#[from] MeshError),
    #[error(transparent)]
    Change(#[from] ChangeError),
    #[error(transparent)]
    Transport(#[from] transport::TransportError),
    #[error("the edge does not serve the mesh: {0}")]
    Probe(#[from] probe::ProbeError),
}

pub type Result<T, E = RunError> = std::result::Result<T, E>;

/// Announces a phase on stderr (`phase: <name>`), so a script can act at the right
/// moment (kill an edge during `hold`, ...).
fn announce(phases: Option<&watch::Sender<&'static str>>, name: &'static str) {
    eprintln!("phase: {name}");
    if let Some(tx) = phases {
        tx.send_replace(name);
    }
}

/// Runs the loadtest described by `config`.
pub async fn run(config: RunConfig) -> Result<Report> {
    let phases = config.phases.clone();
    let phase = |name| announce(phases.as_deref(), name);
    if config.proxies == 0 || config.xds_addrs.is_empty() {
        return Err(RunError::Config(
            "need --proxies > 0 and an --xds-addr".into(),
        ));
    }
    if config.as_endpoints && config.config_dir.is_none() {
        return Err(RunError::Config(
            "--as-endpoints needs --config-dir (the directory `loadtest mesh` wrote)".into(),
        ));
    }
    let mesh = match (&config.config_dir, config.change) {
        (None, ChangeKind::None) => None,
        (None, _) => {
            return Err(RunError::Config(
                "--change vs|endpoint|storm needs --config-dir (the directory `loadtest mesh` wrote)"
                    .into(),
            ));
        }
        (Some(dir), _) => Some(Mesh::generate(&mesh::read_spec(dir)?)),
    };
    let plan = match (&mesh, &config.config_dir) {
        (Some(mesh), Some(dir)) => {
            let entropy = entropy();
            change::plan(config.change, mesh, dir, entropy)?.map(|mut plan| {
                if plan.kind == ChangeKind::Storm {
                    let before = config.storm.changes.saturating_sub(1);
                    plan.before = change::storm(mesh, dir, &plan, before, entropy);
                }
                plan
            })
        }
        _ => None,
    };
    let namespaces = config
        .namespaces
        .or(mesh.as_ref().map(|m| m.spec.namespaces))
        .unwrap_or(10)
        .max(1);
    let target = plan
        .as_ref()
        .map(|p| p.target.clone())
        .unwrap_or(Target::default());
    let conns = config
        .conns
        .unwrap_or(config.proxies.div_ceil(STREAMS_PER_CONN))
        .clamp(1, config.proxies);

    // Every edge serves the mesh before the clock starts; with a random spread, the first
    // edge that does (others may be down, as behind a Service).
    if let Some(last) = mesh.as_ref().and_then(|m| m.services.last()) {
        let cluster = change::cluster_name(last);
        let mut probes = JoinSet::new();
        for addr in config.xds_addrs.clone() {
            let (ns, cluster, timeout) = (last.namespace.clone(), cluster.clone(), config.timeout);
            let security = config.security.clone();
            probes.spawn(async move {
                probe::wait_for_cluster(&addr, &ns, &cluster, timeout, &security).await
            });
        }
        let mut served = 0;
        let mut last_error = None;
        while let Some(done) = probes.join_next().await {
            match done.expect("probe task") {
                Ok(()) => served += 1,
                Err(e) => last_error = Some(e),
            }
            if config.lb == Lb::Random && served > 0 {
                probes.abort_all();
                break;
            }
        }
        if served == 0 || (config.lb == Lb::Spread && last_error.is_some()) {
            return Err(last_error.expect("a probe failed").into());
        }
    }

    // Tokens are minted before the clock starts: one per namespace (every proxy runs as
    // the same service account), as pods of a namespace share theirs.
    for i in 0..namespaces {
        let _ = config
            .security
            .authorization(&namespace_name(i), crate::secure::SERVICE_ACCOUNT);
    }

    let pids: Vec<String> = config.edge_pids.iter().map(u32::to_string).collect();
    let sample_all = || -> Vec<ProcSample> {
        pids.iter()
            .chain([&"self".to_string()])
            .map(|p| procfs::sample(p).unwrap_or_default())
            .collect()
    };
    let before = sample_all();

    let stats = Arc::new(Stats::default());
    let ctx = Arc::new(RunContext {
        shared: Shared::with_cache(target, config.verify_cache),
        stats: stats.clone(),
        start: Instant::now(),
        delta: config.delta,
        namespaces,
        workloads: mesh
            .as_ref()
            .filter(|_| config.as_endpoints)
            .map(Workloads::of),
        limits: config.limits.clone(),
        security: config.security.clone(),
    });
    let mut balancer = Balancer::connect(
        config.lb,
        &config.xds_addrs,
        conns,
        config.limits.open_timeout,
        &config.security.dial,
    )
    .await?;
    if conns >= config.proxies && config.lb == Lb::Spread {
        balancer = balancer.fail_over_on_own_connections(
            &config.xds_addrs,
            config.limits.open_timeout,
            &config.security.dial,
        );
    }
    let balancer = Arc::new(balancer);
    let (shutdown_tx, shutdown) = watch::channel(false);
    let mut tasks = JoinSet::new();
    phase("connect");
    for i in 0..config.proxies {
        let task = proxy::run_proxy(ctx.clone(), i, balancer.clone(), shutdown.clone());
        tasks.spawn(task.in_current_span());
    }

    // Every proxy has its initial config (or gave up), or the timeout.
    let n = config.proxies;
    let synced_all = wait_until(config.timeout, || {
        let done = stats.synced.load(Relaxed);
        (done >= n)
            .then_some(true)
            .or((done + stats.gave_up.load(Relaxed) >= n).then_some(false))
    })
    .await
    .unwrap_or(false);
    let connected = stats.connected.load(Relaxed);
    let synced = stats.synced.load(Relaxed);
    let initial_sync_s = synced_all
        .then(|| (stats.last_sync_ns.load(Relaxed) as f64 / 1e9 * 1000.0).round() / 1000.0);
    let at_sync = sample_all();
    let synced_at = Instant::now();
    let mut timed_out = !synced_all && stats.gave_up.load(Relaxed) + synced < n;
    phase("synced");

    let mut write_ns = 0;
    if let Some(plan) = &plan {
        phase("change");
        stats.changed.store(true, Release);
        // A storm: its edits at the rate asked, the measured one last.
        let every = Duration::from_secs_f64(1.0 / config.storm.rate.max(0.001));
        for (path, contents) in &plan.before {
            change::write_atomically(path, contents)?;
            tokio::time::sleep(every).await;
        }
        change::write_atomically(&plan.path, &plan.contents)?;
        write_ns = ctx.start.elapsed().as_nanos() as u64;
        tracing::info!(service = %plan.service, value = %plan.value, "change written");
        let converged = wait_until(config.timeout, || {
            let expected = stats.expected.load(Relaxed).max(0) as usize;
            (stats.converged_expected.load(Relaxed) >= expected).then_some(())
        })
        .await;
        timed_out |= converged.is_none();
        phase("settle");
        tokio::time::sleep(config.settle).await;
    }
    if !config.hold.is_zero() {
        // Edges may join, die or drain meanwhile: proxies reconnect and resume.
        phase("hold");
        let mut released = config.hold_released.clone();
        tokio::select! {
            _ = tokio::time::sleep(config.hold) => {}
            _ = async {
                match released.as_mut() {
                    Some(rx) => {
                        let _ = rx.wait_for(|done| *done).await;
                    }
                    None => std::future::pending().await,
                }
            } => {}
        }
        // Then every proxy must be connected again wherever it went, and every one whose
        // stream ended served again.
        let reconnected_synced = wait_until(config.timeout, || {
            let lost = stats.streams_lost.load(Relaxed);
            (stats.connected.load(Relaxed) >= n && stats.served_again.load(Relaxed) >= lost)
                .then_some(())
        })
        .await;
        timed_out |= reconnected_synced.is_none();
    }
    let final_connected = stats.connected.load(Relaxed);
    let never_synced = n.saturating_sub(stats.synced.load(Relaxed));
    let final_converged = stats.converged.load(Relaxed);
    phase("done");

    let expected = stats.expected.load(Relaxed).max(0) as usize;
    let _ = shutdown_tx.send(true);
    let drained = tokio::time::timeout(Duration::from_secs(5), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tasks.abort_all();
    }
    // An edge that exited (killed during the hold) keeps its last reading.
    let after: Vec<ProcSample> = sample_all()
        .into_iter()
        .zip(&at_sync)
        .map(|(after, at_sync)| {
            if after == ProcSample::default() {
                *at_sync
            } else {
                after
            }
        })
        .collect();
    let after_sync_s = (synced_at.elapsed().as_secs_f64() * 100.0).round() / 100.0;

    let ms: Vec<f64> = stats
        .converged_at()
        .into_iter()
        .map(|t| t.saturating_sub(write_ns) as f64 / 1e6)
        .collect();
    let pushed = stats.converged.load(Relaxed);
    let procs: Vec<ProcReport> = pids
        .iter()
        .chain([&"self".to_string()])
        .enumerate()
        .map(|(i, pid)| ProcReport::new(pid.clone(), before[i], at_sync[i], after[i]))
        .collect();
    let (edges, me) = procs.split_at(pids.len());
    let per_proxy = PerProxy {
        edges: report::Cost::of(edges, n),
        loadtest: report::Cost::of(me, n),
    };
    let (first_loss, last_loss, last_served) = (
        stats.first_loss_ns.load(Relaxed),
        stats.last_loss_ns.load(Relaxed),
        stats.last_served_again_ns.load(Relaxed),
    );
    let ms_since_first_loss = |at: u64| {
        (first_loss > 0 && at >= first_loss)
            .then(|| ((at - first_loss) as f64 / 1e5).round() / 10.0)
    };
    let resync = Resync {
        streams_lost: Stats::get(&stats.streams_lost),
        served_again: Stats::get(&stats.served_again),
        window_ms: ms_since_first_loss(last_served),
        ended_over_ms: ms_since_first_loss(last_loss),
        gap_ms: Percentiles::of(
            stats
                .served_again_after()
                .into_iter()
                .map(|ns| ns as f64 / 1e6)
                .collect(),
        ),
        within_ms: config.resync_within.map(|d| d.as_secs_f64() * 1000.0),
    };
    Ok(Report {
        proxies: n,
        connected,
        synced,
        never_synced,
        handed_off: Stats::get(&stats.handed_off),
        conns,
        protocol: if config.delta { "delta" } else { "sotw" },
        xds_addrs: config.xds_addrs.clone(),
        initial_sync_s,
        after_sync_s,
        change: plan.as_ref().map(|p| ChangeReport {
            kind: p.kind,
            service: p.service.clone(),
            file: p.path.display().to_string(),
            value: p.value.clone(),
        }),
        proxies_expected: expected,
        proxies_pushed: pushed,
        proxies_pushed_unexpected: pushed - stats.converged_expected.load(Relaxed),
        proxies_not_pushed: n - pushed,
        convergence_ms: Percentiles::of(ms),
        time_to_first_response_ms: Percentiles::of(
            stats
                .first_responses()
                .into_iter()
                .map(|ns| ns as f64 / 1e6)
                .collect(),
        ),
        pushes: Stats::get(&stats.pushes),
        pushes_unneeded: Stats::get(&stats.pushes_unneeded),
        push_bytes: Stats::get(&stats.push_bytes),
        responses: Stats::get(&stats.responses),
        bytes_received: Stats::get(&stats.bytes_received),
        nacks: Stats::get(&stats.nacks),
        errors: Stats::get(&stats.errors),
        reconnects: Stats::get(&stats.reconnects),
        version_regressions: Stats::get(&stats.version_regressions),
        final_connected,
        final_converged,
        gave_up: stats.gave_up.load(Relaxed),
        timed_out,
        edges: edges.to_vec(),
        loadtest: me[0].clone(),
        per_proxy,
        verify_cache: ctx.shared.verified.report(),
        resync,
        error_samples: stats.samples(),
    })
}

/// Polls `done` every 10 ms until it returns `Some`, or `timeout` passes (`None`).
async fn wait_until<T>(timeout: Duration, mut done: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = done() {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A value that differs between runs, for picking fresh change values.
fn entropy() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64 / 1000)
        .unwrap_or(0)
}
