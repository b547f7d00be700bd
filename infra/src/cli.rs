//! Flags every binary shares, declared once: clap `Args` that a binary's own `Args`
//! flattens (`#[command(flatten)]`), so names, environment variables and defaults cannot
//! drift between tiers.
//!
//! | flag | env | default |
//! |---|---|---|
//! | `--nats-url` | `SHOAL_NATS_URL` | `nats://127.0.0.1:4222` |
//! | `--redis-url` | `SHOAL_REDIS_URL` | `redis://127.0.0.1:6379` |
//! | `--http-addr` | `SHOAL_HTTP_ADDR` | `127.0.0.1:15014` |
//! | `--drain-grace` | `SHOAL_DRAIN_GRACE` | `10s` |
//!
//! A binary whose default differs says so on its own `Args` with clap's `mut_arg`, e.g.
//! `#[command(mut_arg("http_addr", |a| a.default_value("0.0.0.0:15014")))]`.

use std::net::SocketAddr;
use std::time::Duration;

/// The NATS server: config KV, push requests, snapshot announcements, membership.
#[derive(Clone, Debug, clap::Args)]
pub struct NatsArgs {
    /// NATS server URL (JetStream enabled).
    #[arg(long, env = "SHOAL_NATS_URL", default_value = "nats://127.0.0.1:4222")]
    pub nats_url: String,
}

/// The Redis server holding snapshots.
#[derive(Clone, Debug, clap::Args)]
pub struct RedisArgs {
    /// Redis server holding snapshots.
    #[arg(
        long,
        env = "SHOAL_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    pub redis_url: String,
}

/// The admin HTTP server ([`crate::admin`]).
#[derive(Clone, Debug, clap::Args)]
pub struct HttpArgs {
    /// Admin HTTP address: /metrics, /healthz/ready, /debug/*.
    #[arg(long, env = "SHOAL_HTTP_ADDR", default_value = "127.0.0.1:15014")]
    pub http_addr: SocketAddr,
}

/// Shutdown ([`crate::supervisor`]).
#[derive(Clone, Debug, clap::Args)]
pub struct DrainArgs {
    /// How long shutdown waits for the tier's work in flight (queued writes and pushes,
    /// a build, streams closing) before it exits anyway.
    #[arg(long, env = "SHOAL_DRAIN_GRACE", default_value = "10s", value_parser = duration)]
    pub drain_grace: Duration,
}

/// Parses a duration flag as Istio writes durations: `250ms`, `10s`, `1m`, `1h`.
pub fn duration(s: &str) -> Result<Duration, String> {
    shoal_proto::config::validate::parse_duration(s).map_err(|e| e.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Shared {
        #[command(flatten)]
        nats: NatsArgs,
        #[command(flatten)]
        redis: RedisArgs,
        #[command(flatten)]
        http: HttpArgs,
    }

    #[test]
    fn flags_and_defaults() {
        let args = Shared::try_parse_from(["x"]).unwrap();
        assert_eq!(args.nats.nats_url, "nats://127.0.0.1:4222");
        assert_eq!(args.redis.redis_url, "redis://127.0.0.1:6379");
        assert_eq!(args.http.http_addr, "127.0.0.1:15014".parse().unwrap());
        let args = Shared::try_parse_from([
            "x",
            "--nats-url",
            "nats://n:1",
            "--redis-url",
            "redis://r:2",
            "--http-addr",
            "0.0.0.0:3",
        ])
        .unwrap();
        assert_eq!(args.nats.nats_url, "nats://n:1");
        assert_eq!(args.redis.redis_url, "redis://r:2");
        assert_eq!(args.http.http_addr, "0.0.0.0:3".parse().unwrap());
    }

    #[test]
    fn durations_as_istio_writes_them() {
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(duration("ten").is_err());
    }
}
