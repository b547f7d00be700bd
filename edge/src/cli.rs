//! The `edge` command line: flags and their environment variables.

use clap::Parser;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "edge",
    version,
    about = "Shoal edge: holds proxies' ADS streams and generates xDS"
)]
pub struct Args {
    /// NATS server (snapshot announcements, membership).
    #[arg(long, env = "SHOAL_NATS_URL", default_value = "nats://127.0.0.1:4222")]
    pub nats_url: String,
    /// Redis server holding snapshots.
    #[arg(
        long,
        env = "SHOAL_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    pub redis_url: String,
    /// ADS gRPC listen address.
    #[arg(long, env = "SHOAL_XDS_ADDR", default_value = "127.0.0.1:15010")]
    pub xds_addr: SocketAddr,
    /// Admin HTTP address: /metrics, /healthz/ready, /debug/syncz, /debug/ring.
    #[arg(long, env = "SHOAL_HTTP_ADDR", default_value = "127.0.0.1:15014")]
    pub http_addr: SocketAddr,
    /// This edge's ID in the membership ring (default: hostname-pid).
    #[arg(long, env = "SHOAL_EDGE_ID")]
    pub edge_id: Option<String>,
    #[command(flatten)]
    pub push: PushArgs,
}

/// Push-queue and stream bounds, shared with the all-in-one `shoal`.
#[derive(Clone, Debug, clap::Args)]
pub struct PushArgs {
    /// Pushes in flight at once across all streams.
    #[arg(long, env = "SHOAL_PUSH_THROTTLE", default_value_t = 100)]
    pub push_throttle: usize,
    /// A response not sent within this time closes its stream.
    #[arg(long, env = "SHOAL_SEND_TIMEOUT", default_value = "5s", value_parser = duration)]
    pub send_timeout: Duration,
    /// Most ADS streams held at once; more are refused with RESOURCE_EXHAUSTED.
    #[arg(long, env = "SHOAL_XDS_MAX_STREAMS", default_value_t = 20_000)]
    pub max_streams: usize,
}

impl PushArgs {
    pub fn apply(&self, xds: &mut crate::ads::XdsConfig) {
        xds.push_throttle = self.push_throttle;
        xds.send_timeout = self.send_timeout;
        xds.max_streams = self.max_streams;
    }
}

pub fn duration(s: &str) -> Result<Duration, String> {
    shoal_proto::config::validate::parse_duration(s).map_err(|e| e.0)
}
