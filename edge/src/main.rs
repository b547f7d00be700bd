use anyhow::Context;
use clap::Parser;
use prometheus_client::registry::Registry;
use shoal_edge::ca::root_cert::Ownership;
use shoal_edge::cli::Args;
use shoal_edge::security::EdgeSecurity;
use shoal_edge::{Edge, EdgeConfig};
use shoal_infra::admin::{AdminServer, Readiness};
use shoal_infra::nats::{NatsBus, NatsMembership, NatsMembershipConfig};
use shoal_infra::redis::RedisSnapshotStore;
use shoal_infra::supervisor::Supervisor;
use std::sync::Arc;

// mimalloc returns freed memory to the OS where glibc's malloc keeps the buffers of a
// sync burst: RSS then reflects what the process holds.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    // Errors are one line, never a backtrace.
    shoal_infra::cli::exit("edge", run(args).map(|()| std::process::ExitCode::SUCCESS))
}

#[tokio::main]
async fn run(args: Args) -> anyhow::Result<()> {
    // Held until the process ends: dropping it flushes the last spans.
    let _telemetry = shoal_infra::telemetry::init(&args.telemetry, "shoal-edge")?;
    let client = args.nats.connect().await.context("connecting to NATS")?;
    let bus = NatsBus::open(client.clone(), args.nats.push_stream())
        .await
        .context("opening the bus")?;
    let membership = NatsMembership::open(client, NatsMembershipConfig::default())
        .await
        .context("opening the membership bucket")?;
    let store = RedisSnapshotStore::connect(args.redis.store_config()?)
        .await
        .context("connecting to Redis")?;

    let mut supervisor = Supervisor::new();
    let mut registry = Registry::default();
    let security = EdgeSecurity::spawn(
        &args.listen,
        &args.security,
        &mut registry,
        supervisor.watcher(),
    )
    .await
    .context("setting up the CA and TLS")?;
    let mut config = EdgeConfig::default();
    config.xds.edge_identity = args.listen.edge_identity();
    if let Some(id) = &args.edge_id {
        config.member_id = id.clone();
    }
    config.advertise_ip = args.advertise_ip;
    args.push.apply(&mut config.xds);
    args.push.caches.apply(&mut config.generator);
    config.jwks = args.push.jwks.config();
    config.handoff = args.handoff();
    let edge = Edge::new(
        config,
        Arc::new(bus),
        Arc::new(store),
        Arc::new(membership),
        &mut registry,
    );
    if let Some(publish) = security.root_cert_publisher(
        Ownership::Ring {
            me: edge.member_id().to_owned(),
            ring: edge.ring(),
        },
        supervisor.watcher().wait(),
    ) {
        tokio::spawn(publish);
    }
    let xds = edge.xds();
    let ring_debug = edge.ring_debug();
    let push_status = edge.push_status_debug();
    let (config_dump, config_diff) = (edge.config_dump_debug(), edge.config_diff_debug());
    let ready = edge.ready();
    let edge = edge.bind(args.listen.listen(&security)).await?;

    let readiness = Readiness::new();
    let admin = AdminServer::new(registry, readiness.clone())
        .debug_access(args.http.debug_access(
            Some(security.authenticator.clone()),
            &args.listen.system_namespace,
        ))
        .debug("syncz", Arc::new(move || xds.syncz()))
        .debug("ring", Arc::new(ring_debug))
        .debug_query("push_status", Arc::new(push_status))
        .debug_query("config_dump", Arc::new(config_dump))
        .debug_query("config_diff", Arc::new(config_diff))
        .bind(args.http.http_addr)
        .await?;
    supervisor.critical("admin", admin.serve(supervisor.watcher().wait()));
    supervisor.critical("edge", edge.run(supervisor.watcher()));
    // Ready once the latest snapshot is served (so proxies never get an empty config from
    // an edge that has not caught up) and the ring is read (so it owns only its own).
    readiness.follow(ready, supervisor.watcher());
    supervisor.run(args.drain.drain_grace).await?;
    Ok(())
}
