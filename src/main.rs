//! `shoal`: ingest, builder and edge in one process, joined by the in-process bus, config
//! KV and snapshot store (the same traits NATS and Redis implement for the split tiers).
//! `shoal analyze DIR` reports what is wrong in a config directory instead (see
//! [`analyze`]); `shoal status` whether a config revision reached the proxies (see
//! [`status`]); `shoal proxy-status` each proxy's sync state (see [`proxy_status`]).

mod analyze;
mod edges;
mod output;
mod proxy_config;
mod proxy_status;
mod status;

use anyhow::Context;
use clap::{Parser, Subcommand};
use prometheus_client::registry::Registry;
use shoal_builder::{Builder, BuilderConfig};
use shoal_edge::ca::root_cert::Ownership;
use shoal_edge::security::EdgeSecurity;
use shoal_edge::{Edge, EdgeConfig};
use shoal_infra::admin::{AdminServer, Readiness};
use shoal_infra::cli::{DrainArgs, HttpArgs, UsageError, duration};
use shoal_infra::memory::{MemoryBus, MemoryConfigKv, MemoryMembership, MemorySnapshotStore};
use shoal_infra::supervisor::Supervisor;
use shoal_infra::telemetry::TelemetryArgs;
use shoal_ingest::IngestConfig;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tracing::info;

#[derive(Debug, Parser)]
#[command(
    name = "shoal",
    version,
    about = "Shoal all-in-one: an Istio-compatible control plane in one process",
    // `shoal --config-dir X` serves; `shoal analyze DIR` takes none of the serving flags.
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Directory of Kubernetes and Istio YAML, watched recursively.
    // An Option only so `shoal analyze` parses: required whenever Shoal serves.
    #[arg(long, env = "SHOAL_CONFIG_DIR", required = true)]
    config_dir: Option<PathBuf>,
    /// The cluster these objects belong to.
    #[arg(long, env = "SHOAL_CLUSTER_ID", default_value = "Kubernetes")]
    cluster_id: String,
    #[command(flatten)]
    listen: shoal_edge::cli::XdsListenArgs,
    #[command(flatten)]
    security: shoal_edge::security::SecurityArgs,
    // Admin HTTP: /metrics, /healthz/ready, /debug/{syncz,rejections,warnings,builder,ring,
    // push_status,config_dump,config_diff}.
    #[command(flatten)]
    http: HttpArgs,
    /// Quiet period before a push, counted from when the source saw the last change.
    #[arg(long, env = "SHOAL_DEBOUNCE_AFTER", default_value = "100ms", value_parser = duration)]
    debounce_after: Duration,
    /// Longest a push waits under a steady stream of events.
    #[arg(long, env = "SHOAL_DEBOUNCE_MAX", default_value = "10s", value_parser = duration)]
    debounce_max: Duration,
    #[command(flatten)]
    push: shoal_edge::cli::PushArgs,
    #[command(flatten)]
    drain: DrainArgs,
    #[command(flatten)]
    telemetry: TelemetryArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Report what is wrong in a directory of Istio and Kubernetes YAML, as `istioctl
    /// analyze` does: invalid objects, references to what does not exist, conflicts, and
    /// what Shoal does not implement.
    Analyze(analyze::AnalyzeArgs),
    /// Whether a config revision reached the proxies it concerned: per edge, how many it
    /// concerned, were sent it, ACKed, NACKed (with Envoy's words) or are pending.
    /// `--wait` waits for the answer, for CI and GitOps pipelines.
    Status(status::StatusArgs),
    /// Every proxy across the edges in `istioctl proxy-status`'s columns (CDS, LDS, EDS,
    /// RDS synced, stale, NACKED or not sent; the edge serving it; the revision it holds),
    /// or one proxy's types in full and how what it ACKed differs from what its edge
    /// would send now.
    ProxyStatus(proxy_status::ProxyStatusArgs),
    /// One proxy's config in Envoy's own config dump JSON, as it ACKed it, from the edge
    /// serving it.
    ProxyConfig(proxy_config::ProxyConfigArgs),
}

// mimalloc returns freed memory to the OS where glibc's malloc keeps the buffers of a
// sync burst: RSS then reflects what the process holds.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let mut args = Args::parse();
    let result = match args.command.take() {
        Some(Command::Analyze(analyze_args)) => Ok(analyze::run(&analyze_args)),
        Some(Command::Status(status_args)) => status::run(status_args),
        Some(Command::ProxyStatus(args)) => proxy_status::run(args),
        Some(Command::ProxyConfig(args)) => proxy_config::run(args),
        None => serve(args).map(|()| ExitCode::SUCCESS),
    };
    // Errors are one line (usage errors exit 2), never a backtrace.
    shoal_infra::cli::exit("shoal", result)
}

#[tokio::main]
async fn serve(args: Args) -> anyhow::Result<()> {
    // Held until the process ends: dropping it flushes the last spans.
    let _telemetry = shoal_infra::telemetry::init(&args.telemetry, "shoal")?;
    let usage = |m: String| anyhow::Error::new(UsageError(m));
    let config_dir = args
        .config_dir
        .clone()
        .ok_or_else(|| usage("--config-dir is required".into()))?;
    if !config_dir.is_dir() {
        let shown = config_dir.display();
        return Err(usage(format!("--config-dir {shown} is not a directory")));
    }
    let kv = Arc::new(MemoryConfigKv::default());
    let bus = Arc::new(MemoryBus::default());
    let store = Arc::new(MemorySnapshotStore::new());
    let membership = Arc::new(MemoryMembership::default());
    let mut registry = Registry::default();
    let mut supervisor = Supervisor::new();
    let security = EdgeSecurity::spawn(
        &args.listen,
        &args.security,
        &mut registry,
        supervisor.watcher(),
    )
    .await
    .context("setting up the CA and TLS")?;

    let mut ingest_config = IngestConfig::new(&config_dir, &args.cluster_id);
    ingest_config.debounce_after = args.debounce_after;
    ingest_config.debounce_max = args.debounce_max;
    let (ingest, ingest_task) = shoal_ingest::run(
        ingest_config,
        kv.clone(),
        bus.clone(),
        &mut registry,
        supervisor.watcher(),
    );
    let builder = Builder::new(
        BuilderConfig::default(),
        kv,
        bus.clone(),
        store.clone(),
        &mut registry,
    );
    let builder_status = builder.status();
    let mut edge_config = EdgeConfig {
        member_id: "shoal".into(),
        ..EdgeConfig::default()
    };
    args.push.apply(&mut edge_config.xds);
    args.push.caches.apply(&mut edge_config.generator);
    edge_config.jwks = args.push.jwks.config();
    edge_config.xds.edge_identity = args.listen.edge_identity();
    // One process: there is no other edge to hand proxies to, so a drain closes every
    // stream at once.
    edge_config.handoff.drain_window = Duration::ZERO;
    let edge = Edge::new(edge_config, bus, store, membership, &mut registry);
    // One edge: it writes every namespace's istio-ca-root-cert.
    if let Some(publish) = security.root_cert_publisher(Ownership::All, supervisor.watcher().wait())
    {
        tokio::spawn(publish);
    }
    let xds = edge.xds();
    let ring_debug = edge.ring_debug();
    let push_status = edge.push_status_debug();
    let (config_dump, config_diff) = (edge.config_dump_debug(), edge.config_diff_debug());
    let edge_ready = edge.ready();
    let edge = edge.bind(args.listen.listen(&security)).await?;

    let readiness = Readiness::new();
    let rejections = ingest.clone();
    let warnings = ingest.clone();
    let status = builder_status.clone();
    let admin = AdminServer::new(registry, readiness.clone())
        .debug_access(args.http.debug_access(
            Some(security.authenticator.clone()),
            &args.listen.system_namespace,
        ))
        .debug("syncz", Arc::new(move || xds.syncz()))
        .debug("rejections", Arc::new(move || rejections.rejections_json()))
        .debug("warnings", Arc::new(move || warnings.warnings_json()))
        .debug("builder", Arc::new(move || status.json()))
        .debug("ring", Arc::new(ring_debug))
        .debug_query("push_status", Arc::new(push_status))
        .debug_query("config_dump", Arc::new(config_dump))
        .debug_query("config_diff", Arc::new(config_diff))
        .bind(args.http.http_addr)
        .await?;
    let (plaintext, secure) = (edge.plaintext_addr(), edge.secure_addr());
    info!(?plaintext, ?secure, http = %admin.local_addr(), config_dir = %config_dir.display(), "shoal serving");
    supervisor.critical("admin", admin.serve(supervisor.watcher().wait()));
    // Ready once the whole path has run: config loaded, built, and served by the edge.
    readiness.follow(
        move || ingest.is_ready() && builder_status.ready() && edge_ready(),
        supervisor.watcher(),
    );
    // A tier that stops on its own is fatal: the others drain and the error is reported.
    supervisor.critical("ingest", ingest_task);
    supervisor.critical("builder", builder.run(supervisor.watcher()));
    supervisor.critical("edge", edge.run(supervisor.watcher()));
    supervisor.run(args.drain.drain_grace).await?;
    Ok(())
}
