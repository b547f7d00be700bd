//! Command-line arguments of the `loadtest` binary.

use clap::{Args, Parser, Subcommand};
use shoal_loadtest::{ChangeKind, Lb};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "loadtest",
    version,
    about = "Synthetic meshes and simulated Envoy proxies for measuring Shoal"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a synthetic mesh as Kubernetes and Istio YAML (deterministic for a seed).
    Mesh(MeshArgs),
    /// Simulate proxies against edges; measure initial sync and the convergence of a change.
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub struct MeshArgs {
    #[arg(long)]
    pub services: usize,
    #[arg(long)]
    pub endpoints_per_service: usize,
    #[arg(long)]
    pub namespaces: usize,
    /// Fraction of services with a VirtualService.
    #[arg(long, default_value_t = 0.5)]
    pub vs_fraction: f64,
    /// Fraction of services with a DestinationRule (subsets by label).
    #[arg(long, default_value_t = 0.5)]
    pub dr_fraction: f64,
    /// Fraction of namespaces with a Sidecar narrowing egress to the namespace.
    #[arg(long, default_value_t = 1.0)]
    pub sidecar_fraction: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Directory to write (created if missing).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Edge ADS addresses, comma-separated; connections are spread over them.
    #[arg(long, value_delimiter = ',', required = true)]
    pub xds_addr: Vec<String>,
    #[arg(long)]
    pub proxies: usize,
    /// HTTP/2 connections the streams share (default: one per 100 proxies).
    #[arg(long)]
    pub conns: Option<usize>,
    /// Namespaces ns-0.. the proxies are spread over (default: the mesh's, else 10).
    #[arg(long)]
    pub namespaces: Option<usize>,
    /// Incremental xDS (DeltaAggregatedResources) instead of state of the world.
    #[arg(long)]
    pub delta: bool,
    /// The change to make once every proxy is synced.
    #[arg(long, value_enum, default_value_t = ChangeKind::None)]
    pub change: ChangeKind,
    /// The directory `loadtest mesh` wrote, served by ingest or shoal.
    #[arg(long)]
    pub config_dir: Option<PathBuf>,
    /// Edge process IDs, comma-separated: their memory and CPU are reported.
    #[arg(long, value_delimiter = ',')]
    pub edge_pid: Vec<u32>,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Seconds each wait (initial sync, convergence) may take.
    #[arg(long, default_value_t = 120.0)]
    pub timeout: f64,
    /// Milliseconds to keep counting pushes after convergence.
    #[arg(long, default_value_t = 500)]
    pub settle_ms: u64,
    /// How streams reach the edges: `spread` pins each proxy to one connection; `random`
    /// sends every stream and reconnect to a random edge, as a Kubernetes Service does.
    #[arg(long, value_enum, default_value_t = Lb::Spread)]
    pub lb: Lb,
    /// Seconds to keep every proxy connected after the change phase (while edges join,
    /// die or drain); then every proxy must be connected again.
    #[arg(long, default_value_t = 0.0)]
    pub hold: f64,
    /// `--change storm`: edits in all (the measured one last).
    #[arg(long, default_value_t = 100)]
    pub changes: usize,
    /// `--change storm`: edits per second.
    #[arg(long, default_value_t = 10.0)]
    pub rate: f64,
}
