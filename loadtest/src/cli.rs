//! Command-line arguments of the `loadtest` binary.

use clap::{Args, Parser, Subcommand};
use shoal_infra::cli::UsageError;
use shoal_loadtest::{ChangeKind, Lb};
use std::path::PathBuf;
use std::time::Duration;

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
    /// N concurrent CreateCertificate callers against the CA; issuance latency.
    Ca(CaArgs),
    /// Write an ES256 key to mint tokens with and the JWKS the edge reads (--jwks-file).
    Keys(KeysArgs),
}

/// How to connect as Istio's agent does (secure port 15012): TLS and per-proxy tokens.
#[derive(Debug, Args)]
pub struct SecureArgs {
    /// The mesh root (PEM): connect over TLS and verify the edge against it.
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// The name verified on the edge's certificate (pilot-agent's default).
    #[arg(long, default_value = shoal_loadtest::secure::DEFAULT_SERVER_NAME)]
    pub tls_server_name: String,
    /// The ES256 key (PKCS#8 PEM, from `loadtest keys`): each stream carries a token for
    /// its own namespace/service account, audience istio-ca.
    #[arg(long, requires = "jwt_issuer")]
    pub jwt_key: Option<PathBuf>,
    /// The tokens' issuer (the edge's --jwt-issuer).
    #[arg(long)]
    pub jwt_issuer: Option<String>,
}

impl SecureArgs {
    pub fn config(&self) -> shoal_loadtest::secure::SecurityConfig {
        shoal_loadtest::secure::SecurityConfig {
            tls_ca: self.tls_ca.clone(),
            tls_server_name: Some(self.tls_server_name.clone()),
            jwt_key: self.jwt_key.clone(),
            jwt_issuer: self.jwt_issuer.clone(),
        }
    }
}

#[derive(Debug, Args)]
pub struct KeysArgs {
    /// Where to write the private key (PKCS#8 PEM, mode 0600).
    #[arg(long)]
    pub jwt_key: PathBuf,
    /// Where to write the JWKS.
    #[arg(long)]
    pub jwks: PathBuf,
}

#[derive(Debug, Args)]
pub struct CaArgs {
    /// The edge's secure address (the CA is served there).
    #[arg(long, default_value = "127.0.0.1:15012")]
    pub addr: String,
    /// Concurrent callers, each with its own identity, key, CSR and token.
    #[arg(long, default_value_t = 1000)]
    pub callers: usize,
    /// HTTP/2 connections they share (default: one each, as agents).
    #[arg(long)]
    pub conns: Option<usize>,
    /// Namespaces ns-0.. the callers are spread over.
    #[arg(long, default_value_t = 10)]
    pub namespaces: usize,
    #[arg(long, default_value = "cluster.local")]
    pub trust_domain: String,
    /// Requested certificate validity in seconds (0: the CA's default).
    #[arg(long, default_value_t = 0)]
    pub validity_s: u64,
    /// Seconds each call (and each connection) may take.
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f64,
    /// Edge process IDs, comma-separated: their CPU and memory are reported.
    #[arg(long, value_delimiter = ',')]
    pub edge_pid: Vec<u32>,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub secure: SecureArgs,
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
    /// Place each proxy at one of the mesh's endpoints (its service's namespace and
    /// address), as in a real mesh where every endpoint is a pod with its proxy; proxies
    /// past the mesh's endpoints sit at addresses no endpoint has. Needs --config-dir.
    #[arg(long)]
    pub as_endpoints: bool,
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
    /// Distinct responses whose verification is remembered: a copy of one (same type,
    /// same resource bytes) is recognised by its hash, not decoded again. 0: decode
    /// every response every proxy receives.
    #[arg(long, default_value_t = shoal_loadtest::client::verified::DEFAULT_CAPACITY)]
    pub verify_cache: usize,
    /// A connection's writes are gathered up to this many bytes (the requests of the
    /// proxies' streams it carries), as the edge gathers its own; 0: written as they come.
    #[arg(long, default_value_t = shoal_loadtest::secure::DEFAULT_WRITE_COALESCE_BYTES, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=16 * 1024 * 1024))]
    pub write_coalesce_bytes: usize,
    /// With --hold: every proxy whose stream ends (an edge killed or drained) must be
    /// served again, the last within this many seconds of the first end (an edge's drain
    /// grace); else the run fails.
    #[arg(long)]
    pub resync_within: Option<f64>,
    #[command(flatten)]
    pub secure: SecureArgs,
}

/// The longest wait a flag may ask for: a year (a deadline that far still fits an
/// `Instant`; one near `Duration::MAX` would overflow it).
const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// `seconds` of flag `flag` as a duration: a clear error, not a panic, for a value that
/// is not a positive number of seconds up to a year (NaN, negative, infinite, 1e300).
pub fn positive_seconds(flag: &str, seconds: f64) -> Result<Duration, UsageError> {
    match Duration::try_from_secs_f64(seconds) {
        Ok(d) if !d.is_zero() && seconds <= MAX_SECONDS => Ok(d),
        _ => Err(UsageError(format!(
            "{flag} must be a positive number of seconds, at most {MAX_SECONDS} (a year), \
             not {seconds:?}"
        ))),
    }
}

/// Like [`positive_seconds`], where 0 (and a negative value, as before) means none.
pub fn seconds_or_zero(flag: &str, seconds: f64) -> Result<Duration, UsageError> {
    if seconds <= 0.0 {
        return Ok(Duration::ZERO);
    }
    positive_seconds(flag, seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_durations_are_one_line_errors() {
        assert_eq!(
            positive_seconds("--timeout", 2.5).unwrap(),
            Duration::from_millis(2500)
        );
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e300, 1e15] {
            let e = positive_seconds("--timeout", bad).unwrap_err().to_string();
            assert!(e.starts_with("--timeout must be a positive number"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        assert_eq!(seconds_or_zero("--hold", -3.0).unwrap(), Duration::ZERO);
        assert_eq!(seconds_or_zero("--hold", 0.0).unwrap(), Duration::ZERO);
        assert!(seconds_or_zero("--hold", 1e300).is_err());
        assert!(seconds_or_zero("--hold", f64::NAN).is_err());
    }

    /// `loadtest run` for one proxy at a dead address, with `extra` flags.
    fn run_args(extra: &[&str]) -> Result<RunArgs, clap::Error> {
        let mut argv = vec![
            "loadtest",
            "run",
            "--xds-addr",
            "127.0.0.1:1",
            "--proxies",
            "1",
        ];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).map(|cli| match cli.command {
            Command::Run(args) => args,
            _ => panic!("run"),
        })
    }

    #[test]
    fn the_binary_parses_absurd_values_then_refuses_them() {
        let args = run_args(&["--timeout", "1e300"]).unwrap();
        assert!(positive_seconds("--timeout", args.timeout).is_err());
    }

    #[test]
    fn write_coalescing_is_set_within_its_range() {
        let bytes = |extra: &[&str]| run_args(extra).map(|a| a.write_coalesce_bytes);
        assert_eq!(bytes(&[]).unwrap(), 64 * 1024);
        assert_eq!(bytes(&["--write-coalesce-bytes", "0"]).unwrap(), 0, "off");
        for bad in ["16777217", "-1", "lots"] {
            assert!(bytes(&["--write-coalesce-bytes", bad]).is_err(), "{bad}");
        }
    }
}
