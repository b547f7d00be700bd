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

use std::error::Error;
use std::net::SocketAddr;
use std::ops::Deref;
use std::process::ExitCode;
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
    /// Answer /debug/* only to callers on this host or authenticated as the control
    /// plane's namespace; false opens them to anyone (Istio's DEBUG_AUTH; not for
    /// production). /metrics and /healthz/ready are always open.
    #[arg(long, env = "SHOAL_DEBUG_AUTH", default_value_t = true, action = clap::ArgAction::Set)]
    pub debug_auth: bool,
}

impl HttpArgs {
    /// The `/debug/*` rule these flags ask for; `authenticator` verifies remote callers'
    /// tokens (none: callers on this host only).
    pub fn debug_access(
        &self,
        authenticator: Option<std::sync::Arc<dyn shoal_proto::security::Authenticator>>,
        system_namespace: &str,
    ) -> crate::admin::DebugAccess {
        if self.debug_auth {
            crate::admin::DebugAccess::local_or_authenticated(authenticator, system_namespace)
        } else {
            crate::admin::DebugAccess::open()
        }
    }
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

/// A command line that makes no sense (flags that need or exclude each other, a value
/// out of range): reported on one line, exit status 2, as clap reports its own.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// How a binary ends on `result` (an `anyhow::Result` in practice): a [`UsageError`]
/// anywhere in the chain is one line and status 2; any other error is one line with its
/// causes (`a: b: c`) and status 1. Never a backtrace, whatever `RUST_BACKTRACE` says:
/// that is for panics, not for an operator's mistake or an unreachable server.
pub fn exit<E>(binary: &str, result: Result<ExitCode, E>) -> ExitCode
where
    E: Deref<Target = dyn Error + Send + Sync + 'static>,
{
    let error = match result {
        Ok(code) => return code,
        Err(error) => error,
    };
    let (line, code) = report(&*error);
    eprintln!("{binary}: error: {line}");
    ExitCode::from(code)
}

/// The line and the exit status for `error`.
fn report(error: &(dyn Error + 'static)) -> (String, u8) {
    let mut parts = Vec::new();
    let mut usage = false;
    let mut next = Some(error);
    while let Some(e) = next {
        usage |= e.is::<UsageError>();
        let text = e.to_string();
        // Some errors repeat their source in their own text.
        if parts
            .last()
            .is_none_or(|last: &String| !last.contains(&text))
        {
            parts.push(text);
        }
        next = e.source();
    }
    (parts.join(": "), if usage { 2 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, thiserror::Error)]
    #[error("connecting to NATS")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn errors_are_one_line_and_usage_errors_exit_2() {
        let usage = UsageError("--config-dir is required".into());
        assert_eq!(report(&usage), ("--config-dir is required".into(), 2));
        let runtime = Outer(std::io::Error::other("connection refused"));
        assert_eq!(
            report(&runtime),
            ("connecting to NATS: connection refused".into(), 1)
        );
    }

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
