//! The `builder` command line: flags and their environment variables.

use clap::Parser;
use shoal_infra::cli::{DrainArgs, HttpArgs, NatsArgs, RedisArgs, duration};
use shoal_infra::telemetry::TelemetryArgs;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "builder",
    version,
    about = "Shoal builder: push requests → PushContext snapshots in Redis"
)]
pub struct Args {
    // NATS: config KV, push requests, snapshot announcements.
    #[command(flatten)]
    pub nats: NatsArgs,
    #[command(flatten)]
    pub redis: RedisArgs,
    // Admin HTTP: /metrics, /healthz/ready, /debug/builder.
    #[command(flatten)]
    pub http: HttpArgs,
    #[command(flatten)]
    pub drain: DrainArgs,
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
    /// How long a non-latest snapshot manifest is kept.
    #[arg(long, env = "SHOAL_MANIFEST_TTL", default_value = "10m", value_parser = duration)]
    pub manifest_ttl: Duration,
    /// How long a chunk (or manifest page) is kept unless a live manifest refreshes it.
    #[arg(long, env = "SHOAL_CHUNK_TTL", default_value = "1h", value_parser = duration)]
    pub chunk_ttl: Duration,
    /// Queued push requests merged into one build, at most.
    #[arg(long, env = "SHOAL_BUILD_MAX_BATCH", default_value_t = 256)]
    pub max_batch: usize,
    /// How often the store is checked for the latest snapshot; one that lost it (Redis
    /// restarted empty) is refilled within this.
    #[arg(long, env = "SHOAL_STORE_CHECK", default_value = "1s", value_parser = duration)]
    pub store_check: Duration,
    /// Config KV entries held for the build loop while a build runs.
    #[arg(long, env = "SHOAL_BUILD_FEED_CAPACITY", default_value_t = 65_536)]
    pub feed_capacity: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn shared_flags_keep_their_defaults() {
        Args::command().debug_assert();
        let args = Args::try_parse_from(["x"]).unwrap();
        assert_eq!(args.nats.nats_url, "nats://127.0.0.1:4222");
        assert_eq!(args.redis.redis_url, "redis://127.0.0.1:6379");
        assert_eq!(args.http.http_addr, "127.0.0.1:15014".parse().unwrap());
    }
}
