//! The `builder` command line: flags and their environment variables.

use clap::Parser;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "builder",
    version,
    about = "Shoal builder: push requests → PushContext snapshots in Redis"
)]
pub struct Args {
    /// NATS server (config KV, push requests, snapshot announcements).
    #[arg(long, env = "SHOAL_NATS_URL", default_value = "nats://127.0.0.1:4222")]
    pub nats_url: String,
    /// Redis server holding snapshots.
    #[arg(
        long,
        env = "SHOAL_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    pub redis_url: String,
    /// Admin HTTP address: /metrics, /healthz/ready, /debug/builder.
    #[arg(long, env = "SHOAL_HTTP_ADDR", default_value = "127.0.0.1:15014")]
    pub http_addr: SocketAddr,
    /// How long a non-latest snapshot manifest is kept.
    #[arg(long, env = "SHOAL_MANIFEST_TTL", default_value = "10m", value_parser = duration)]
    pub manifest_ttl: Duration,
    /// How long a chunk is kept unless a live manifest refreshes it.
    #[arg(long, env = "SHOAL_CHUNK_TTL", default_value = "1h", value_parser = duration)]
    pub chunk_ttl: Duration,
    /// Queued push requests merged into one build, at most.
    #[arg(long, env = "SHOAL_BUILD_MAX_BATCH", default_value_t = 256)]
    pub max_batch: usize,
}

pub fn duration(s: &str) -> Result<Duration, String> {
    shoal_proto::config::validate::parse_duration(s).map_err(|e| e.0)
}
