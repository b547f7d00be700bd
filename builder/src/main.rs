use anyhow::Context;
use clap::Parser;
use prometheus_client::registry::Registry;
use shoal_builder::{Builder, BuilderConfig, Retention, cli::Args};
use shoal_infra::admin::{AdminServer, Readiness};
use shoal_infra::nats::{NatsBus, NatsConfigKv};
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
    shoal_infra::cli::exit(
        "builder",
        run(args).map(|()| std::process::ExitCode::SUCCESS),
    )
}

#[tokio::main]
async fn run(args: Args) -> anyhow::Result<()> {
    // Held until the process ends: dropping it flushes the last spans.
    let _telemetry = shoal_infra::telemetry::init(&args.telemetry, "shoal-builder")?;
    let client = args.nats.connect().await.context("connecting to NATS")?;
    let kv = NatsConfigKv::open(client.clone(), args.nats.config_kv())
        .await
        .context("opening the config KV")?;
    let bus = NatsBus::open(client, args.nats.push_stream())
        .await
        .context("opening the push stream")?;
    let store = RedisSnapshotStore::connect(args.redis.store_config()?)
        .await
        .context("connecting to Redis")?;

    let mut registry = Registry::default();
    let config = BuilderConfig {
        retention: Retention {
            manifest_ttl: args.manifest_ttl,
            chunk_ttl: args.chunk_ttl,
        },
        max_batch: args.max_batch,
        store_check_every: args.store_check,
        feed_capacity: args.feed_capacity,
        ..BuilderConfig::default()
    };
    let builder = Builder::new(
        config,
        Arc::new(kv),
        Arc::new(bus),
        Arc::new(store),
        &mut registry,
    );
    let status = builder.status();

    let mut supervisor = Supervisor::new();
    let readiness = Readiness::new();
    let admin = AdminServer::new(registry, readiness.clone())
        .debug_access(args.http.debug_access(None, "istio-system"))
        .debug(
            "builder",
            Arc::new({
                let status = status.clone();
                move || status.json()
            }),
        )
        .bind(args.http.http_addr)
        .await?;
    supervisor.critical("admin", admin.serve(supervisor.watcher().wait()));
    supervisor.critical("builder", builder.run(supervisor.watcher()));
    // Ready once the replica has synced.
    readiness.follow(move || status.ready(), supervisor.watcher());
    supervisor.run(args.drain.drain_grace).await?;
    Ok(())
}
