//! `loadtest mesh` writes a synthetic mesh; `loadtest run` measures Shoal with simulated
//! proxies. See loadtest/README.md.

mod cli;

use anyhow::Context;
use clap::Parser;
use cli::{CaArgs, Cli, Command, MeshArgs, RunArgs, positive_seconds, seconds_or_zero};
use shoal_loadtest::ca::CaConfig;
use shoal_loadtest::secure::Security;
use shoal_loadtest::{RunConfig, mesh, run};
use shoal_test_support::meshgen::MeshSpec;
use std::time::Duration;

// The allocator the edges run with: its per-thread caches suit a million small tasks.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // Errors are one line (usage errors exit 2), never a backtrace.
    shoal_infra::cli::exit(
        "loadtest",
        run_main().map(|()| std::process::ExitCode::SUCCESS),
    )
}

#[tokio::main]
async fn run_main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    match Cli::parse().command {
        Command::Mesh(args) => write_mesh(args),
        Command::Run(args) => run_load(args).await,
        Command::Ca(args) => run_ca(args).await,
        Command::Keys(args) => Ok(shoal_loadtest::secure::keys::write_keys(
            &args.jwt_key,
            &args.jwks,
        )?),
    }
}

fn write_mesh(a: MeshArgs) -> anyhow::Result<()> {
    let spec = MeshSpec {
        services: a.services,
        endpoints_per_service: a.endpoints_per_service,
        namespaces: a.namespaces,
        vs_fraction: a.vs_fraction,
        dr_fraction: a.dr_fraction,
        sidecar_fraction: a.sidecar_fraction,
        seed: a.seed,
    };
    println!("{}", mesh::write_mesh(&spec, &a.out)?);
    Ok(())
}

async fn run_load(a: RunArgs) -> anyhow::Result<()> {
    let timeout = positive_seconds("--timeout", a.timeout)?;
    let hold = seconds_or_zero("--hold", a.hold)?;
    let mut config = RunConfig {
        xds_addrs: a.xds_addr,
        proxies: a.proxies,
        conns: a.conns,
        namespaces: a.namespaces,
        as_endpoints: a.as_endpoints,
        delta: a.delta,
        change: a.change,
        config_dir: a.config_dir,
        edge_pids: a.edge_pid,
        timeout,
        settle: Duration::from_millis(a.settle_ms),
        lb: a.lb,
        hold,
        storm: shoal_loadtest::Storm {
            changes: a.changes.max(1),
            rate: a.rate,
        },
        security: Security::load(&a.secure.config())?.with_write_coalescing(a.write_coalesce_bytes),
        verify_cache: a.verify_cache,
        resync_within: a
            .resync_within
            .map(|s| positive_seconds("--resync-within", s))
            .transpose()?,
        ..RunConfig::default()
    };
    // A loaded machine can take long to answer thousands of new streams: opening one may
    // take as long as any other wait.
    config.limits.open_timeout = config.limits.open_timeout.max(config.timeout);
    let report = run(config).await?;
    println!("{report}");
    println!("summary: {}", report.summary());
    if let Some(path) = &a.json {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    let failures = report.failures();
    anyhow::ensure!(
        failures.is_empty(),
        "the run failed: {}",
        failures.join("; ")
    );
    Ok(())
}

async fn run_ca(a: CaArgs) -> anyhow::Result<()> {
    let timeout = positive_seconds("--timeout", a.timeout)?;
    let config = CaConfig {
        addr: a.addr,
        callers: a.callers,
        conns: a.conns,
        namespaces: a.namespaces,
        trust_domain: a.trust_domain,
        validity: Duration::from_secs(a.validity_s),
        timeout,
        edge_pids: a.edge_pid,
        security: Security::load(&a.secure.config())?,
    };
    let report = shoal_loadtest::ca::run_ca(config).await?;
    print!("{report}");
    if let Some(path) = &a.json {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    anyhow::ensure!(
        report.errors == 0,
        "{} of {} calls failed",
        report.errors,
        report.callers
    );
    Ok(())
}
