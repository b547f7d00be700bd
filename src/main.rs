//! `shoal`: ingest, builder and edge in one process, joined by the in-process bus, config
//! KV and snapshot store (the same traits NATS and Redis implement for the split tiers).

use anyhow::Context;
use clap::Parser;
use prometheus_client::registry::Registry;
use shoal_builder::{Builder, BuilderConfig};
use shoal_edge::{Edge, EdgeConfig};
use shoal_infra::admin::{AdminServer, Readiness};
use shoal_infra::cli::{HttpArgs, duration};
use shoal_infra::memory::{MemoryBus, MemoryConfigKv, MemoryMembership, MemorySnapshotStore};
use shoal_infra::runtime::{Drain, init_tracing, shutdown_signal};
use shoal_ingest::IngestConfig;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tracing::{error, info};

#[derive(Debug, Parser)]
#[command(
    name = "shoal",
    version,
    about = "Shoal all-in-one: an Istio-compatible control plane in one process"
)]
struct Args {
    /// Directory of Kubernetes and Istio YAML, watched recursively.
    #[arg(long, env = "SHOAL_CONFIG_DIR")]
    config_dir: PathBuf,
    /// The cluster these objects belong to.
    #[arg(long, env = "SHOAL_CLUSTER_ID", default_value = "Kubernetes")]
    cluster_id: String,
    /// ADS gRPC listen address.
    #[arg(long, env = "SHOAL_XDS_ADDR", default_value = "127.0.0.1:15010")]
    xds_addr: SocketAddr,
    // Admin HTTP: /metrics, /healthz/ready, /debug/{syncz,rejections,builder,ring}.
    #[command(flatten)]
    http: HttpArgs,
    /// Quiet period before a push.
    #[arg(long, env = "SHOAL_DEBOUNCE_AFTER", default_value = "100ms", value_parser = duration)]
    debounce_after: Duration,
    /// Longest a push waits under a steady stream of events.
    #[arg(long, env = "SHOAL_DEBOUNCE_MAX", default_value = "10s", value_parser = duration)]
    debounce_max: Duration,
    #[command(flatten)]
    push: shoal_edge::cli::PushArgs,
}

// mimalloc returns freed memory to the OS where glibc's malloc keeps the buffers of a
// sync burst: RSS then reflects what the process holds.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    init_tracing();
    let args = Args::parse();
    anyhow::ensure!(
        args.config_dir.is_dir(),
        "--config-dir {} is not a directory",
        args.config_dir.display()
    );
    let kv = Arc::new(MemoryConfigKv::default());
    let bus = Arc::new(MemoryBus::default());
    let store = Arc::new(MemorySnapshotStore::new());
    let membership = Arc::new(MemoryMembership::default());
    let mut registry = Registry::default();
    let drain = Drain::new();

    let mut ingest_config = IngestConfig::new(&args.config_dir, &args.cluster_id);
    ingest_config.debounce_after = args.debounce_after;
    ingest_config.debounce_max = args.debounce_max;
    let (ingest, ingest_task) = shoal_ingest::run(
        ingest_config,
        kv.clone(),
        bus.clone(),
        &mut registry,
        drain.watcher(),
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
    let edge = Edge::new(edge_config, bus, store, membership, &mut registry);
    let xds = edge.xds();
    let ring_debug = edge.ring_debug();
    let synced = edge.synced();
    let edge = edge.bind(args.xds_addr).await?;

    let readiness = Readiness::new();
    let rejections = ingest.clone();
    let status = builder_status.clone();
    let admin = AdminServer::new(registry, readiness.clone())
        .debug("syncz", Arc::new(move || xds.syncz()))
        .debug("rejections", Arc::new(move || rejections.rejections_json()))
        .debug("builder", Arc::new(move || status.json()))
        .debug("ring", Arc::new(ring_debug))
        .bind(args.http.http_addr)
        .await?;
    info!(xds = %edge.local_addr(), http = %admin.local_addr(), config_dir = %args.config_dir.display(), "shoal serving");
    let admin = tokio::spawn(admin.serve(drain.watcher().wait()));
    tokio::spawn(async move {
        // Ready once the whole path has run: config loaded, built, and served by the edge.
        while !(ingest.is_ready() && builder_status.ready() && synced.load(Ordering::Acquire)) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        readiness.set_ready(true);
    });

    let mut ingest = tokio::spawn(ingest_task);
    let builder_watch = drain.watcher();
    let mut builder = tokio::spawn(builder.run(async move { builder_watch.wait().await }));
    let edge_watch = drain.watcher();
    let mut edge = tokio::spawn(edge.run(move || edge_watch.wait()));

    // A tier that stops on its own is fatal: stop the others and report it.
    let outcome: anyhow::Result<()> = tokio::select! {
        _ = shutdown_signal() => Ok(()),
        r = &mut ingest => Err(anyhow::anyhow!("ingest stopped: {:?}", r)),
        r = &mut builder => Err(anyhow::anyhow!("builder stopped: {:?}", r)),
        r = &mut edge => Err(anyhow::anyhow!("edge stopped: {:?}", r)),
    };
    if let Err(e) = &outcome {
        error!("{e}");
    }
    if !drain.signal_and_wait(Duration::from_secs(10)).await {
        info!("drain grace elapsed");
    }
    let _ = admin.await;
    outcome.context("shoal")
}
