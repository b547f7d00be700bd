//! `agent-stand-in`: a stand-in for Istio's pilot-agent; see the library's docs.

use shoal_agent_stand_in::{ca_client, config, sds, secrets, tls, xds_proxy};

use anyhow::Context;
use clap::Parser;
use std::path::Path;
use tokio::net::UnixListener;
use tracing::info;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = config::Args::parse();
    let cfg = config::Config::from_args(args)?;
    info!(
        spiffe = %cfg.spiffe_id,
        discovery = %cfg.discovery_address,
        ca = %cfg.ca_address,
        server_name = %cfg.server_name,
        "agent stand-in starting"
    );
    let ca_tls = tls::client_config(&cfg.root_ca_pem, &cfg.server_name)
        .with_context(|| format!("CA root {}", cfg.root_ca_path.display()))?;
    let xds_tls =
        tls::client_config(&cfg.xds_root_ca_pem, &cfg.server_name).context("XDS_ROOT_CA")?;
    let ca = ca_client::CaClient::new(&cfg.ca_address, &cfg.server_name, ca_tls, &cfg)?;
    let upstream =
        xds_proxy::Upstream::new(&cfg.discovery_address, &cfg.server_name, xds_tls, &cfg)?;

    let sds_socket = bind(&cfg.work_dir, "var/run/secrets/workload-spiffe-uds/socket")?;
    let xds_socket = bind(&cfg.work_dir, "etc/istio/proxy/XDS")?;

    // The first certificate before SDS answers, as the agent: Envoy waits on its secrets.
    let secrets = secrets::SecretManager::start(ca, cfg.clone()).await?;
    let sds = tokio::spawn(sds::serve(sds_socket, secrets.subscribe()));
    let xds = tokio::spawn(xds_proxy::serve(xds_socket, upstream));
    tokio::select! {
        r = sds => r.context("SDS server task")?.context("SDS server"),
        r = xds => r.context("xDS proxy task")?.context("xDS proxy"),
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// A fresh Unix listener at `work_dir/relative`, its folder made and a stale socket
/// removed (the agent does the same on restart).
fn bind(work_dir: &Path, relative: &str) -> anyhow::Result<UnixListener> {
    let path = work_dir.join(relative);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("remove {}", path.display())),
    }
    UnixListener::bind(&path).with_context(|| format!("bind {}", path.display()))
}
