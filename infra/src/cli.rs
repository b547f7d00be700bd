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
//! | `--nats-config-max-bytes` | `SHOAL_NATS_CONFIG_MAX_BYTES` | 1 GiB |
//! | `--nats-push-max-bytes` | `SHOAL_NATS_PUSH_MAX_BYTES` | 256 MiB |
//!
//! TLS and credentials towards NATS and Redis, all off by default ([`NatsArgs`],
//! [`RedisArgs`]): a `tls://` / `rediss://` URL or a CA file turns TLS on; passwords and
//! tokens come from environment variables or files, never needed on the command line,
//! and are printed as `***` wherever printed (URLs too: `redis://user:***@host`).
//!
//! A binary whose default differs says so on its own `Args` with clap's `mut_arg`, e.g.
//! `#[command(mut_arg("http_addr", |a| a.default_value("0.0.0.0:15014")))]`.

use crate::nats::{self, ConnectConfig, NatsAuth, NatsBusConfig, NatsConfigKvConfig};
use crate::redis::{self, RedisConfig};
use crate::secret::{Secret, redact_url, redact_urls};
use crate::tls::TlsFiles;
use std::error::Error;
use std::net::SocketAddr;
use std::ops::Deref;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The NATS server: config KV, push requests, snapshot announcements, membership.
#[derive(Clone, clap::Args)]
pub struct NatsArgs {
    /// NATS server URL (JetStream enabled); several, comma-separated, for a cluster.
    /// `tls://` requires TLS.
    #[arg(long, env = "SHOAL_NATS_URL", default_value = "nats://127.0.0.1:4222")]
    pub nats_url: String,
    /// CA certificate (PEM) the NATS server's certificate is verified against; requires
    /// TLS. The system's roots are not needed.
    #[arg(long, env = "SHOAL_NATS_TLS_CA")]
    pub nats_tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS with NATS; requires TLS.
    #[arg(long, env = "SHOAL_NATS_TLS_CERT", requires = "nats_tls_key")]
    pub nats_tls_cert: Option<PathBuf>,
    /// Private key (PEM) of `--nats-tls-cert`.
    #[arg(long, env = "SHOAL_NATS_TLS_KEY", requires = "nats_tls_cert")]
    pub nats_tls_key: Option<PathBuf>,
    /// NATS `.creds` file (user JWT and NKey seed), for decentralized (operator) auth.
    #[arg(long, env = "SHOAL_NATS_CREDS", conflicts_with_all = ["nats_user", "nats_token", "nats_token_file"])]
    pub nats_creds: Option<PathBuf>,
    /// NATS user; the password comes from `SHOAL_NATS_PASSWORD` or `--nats-password-file`.
    #[arg(long, env = "SHOAL_NATS_USER", conflicts_with_all = ["nats_token", "nats_token_file"])]
    pub nats_user: Option<String>,
    /// The NATS user's password. Prefer the environment variable (or the file) to the
    /// flag, which other users may see in the process list.
    #[arg(long, env = "SHOAL_NATS_PASSWORD", hide_env_values = true, value_parser = Secret::parse, requires = "nats_user", conflicts_with = "nats_password_file")]
    pub nats_password: Option<Secret>,
    /// File holding the NATS user's password.
    #[arg(long, env = "SHOAL_NATS_PASSWORD_FILE", requires = "nats_user")]
    pub nats_password_file: Option<PathBuf>,
    /// NATS authentication token. Prefer the environment variable (or the file).
    #[arg(long, env = "SHOAL_NATS_TOKEN", hide_env_values = true, value_parser = Secret::parse, conflicts_with = "nats_token_file")]
    pub nats_token: Option<Secret>,
    /// File holding the NATS authentication token.
    #[arg(long, env = "SHOAL_NATS_TOKEN_FILE")]
    pub nats_token_file: Option<PathBuf>,
    /// Bound of the config bucket (`shoal_config`) in bytes: writes beyond it fail. The
    /// NATS server reserves it in its JetStream file storage when the bucket is created;
    /// an existing bucket keeps its bound.
    #[arg(long, env = "SHOAL_NATS_CONFIG_MAX_BYTES", default_value_t = NatsConfigKvConfig::default().max_bytes, value_parser = clap::value_parser!(i64).range(1024 * 1024..))]
    pub nats_config_max_bytes: i64,
    /// Bound of the push stream (`SHOAL_PUSH`) in bytes: beyond it publishes fail and
    /// ingest merges and retries. Reserved in the server's JetStream file storage.
    #[arg(long, env = "SHOAL_NATS_PUSH_MAX_BYTES", default_value_t = NatsBusConfig::default().max_bytes, value_parser = clap::value_parser!(i64).range(1024 * 1024..))]
    pub nats_push_max_bytes: i64,
}

impl NatsArgs {
    /// The connection settings the flags say, secrets read from their files.
    pub fn connect_config(&self) -> nats::Result<ConnectConfig> {
        let tls = TlsFiles {
            ca: self.nats_tls_ca.clone(),
            cert: self.nats_tls_cert.clone(),
            key: self.nats_tls_key.clone(),
        };
        let auth = if let Some(path) = &self.nats_creds {
            NatsAuth::CredsFile(path.clone())
        } else if let Some(user) = &self.nats_user {
            let password = secret(&self.nats_password, &self.nats_password_file, "password")
                .map_err(nats_secret_error)?
                .unwrap_or_else(|| Secret::new(""));
            NatsAuth::UserPassword {
                user: user.clone(),
                password,
            }
        } else if let Some(token) =
            secret(&self.nats_token, &self.nats_token_file, "token").map_err(nats_secret_error)?
        {
            NatsAuth::Token(token)
        } else {
            NatsAuth::None
        };
        Ok(ConnectConfig {
            tls: (!tls.is_empty()).then_some(tls),
            auth,
            ..ConnectConfig::default()
        })
    }

    /// Connects as the flags say ([`nats::connect_with`]).
    pub async fn connect(&self) -> nats::Result<async_nats::Client> {
        nats::connect_with(&self.nats_url, &self.connect_config()?).await
    }

    /// The config bucket's settings, its bound as the flags say.
    pub fn config_kv(&self) -> NatsConfigKvConfig {
        NatsConfigKvConfig {
            max_bytes: self.nats_config_max_bytes,
            ..NatsConfigKvConfig::default()
        }
    }

    /// The push stream's settings, its bound as the flags say.
    pub fn push_stream(&self) -> NatsBusConfig {
        NatsBusConfig {
            max_bytes: self.nats_push_max_bytes,
            ..NatsBusConfig::default()
        }
    }
}

impl std::fmt::Debug for NatsArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsArgs")
            .field("nats_url", &redact_urls(&self.nats_url))
            .field("nats_tls_ca", &self.nats_tls_ca)
            .field("nats_tls_cert", &self.nats_tls_cert)
            .field("nats_tls_key", &self.nats_tls_key)
            .field("nats_creds", &self.nats_creds)
            .field("nats_user", &self.nats_user)
            .field("nats_password", &self.nats_password)
            .field("nats_password_file", &self.nats_password_file)
            .field("nats_token", &self.nats_token)
            .field("nats_token_file", &self.nats_token_file)
            .field("nats_config_max_bytes", &self.nats_config_max_bytes)
            .field("nats_push_max_bytes", &self.nats_push_max_bytes)
            .finish()
    }
}

/// The Redis server holding snapshots.
#[derive(Clone, clap::Args)]
pub struct RedisArgs {
    /// Redis server holding snapshots. `rediss://` requires TLS; `user:password@` in it
    /// works, but `SHOAL_REDIS_PASSWORD` keeps the password out of the URL.
    #[arg(
        long,
        env = "SHOAL_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    pub redis_url: String,
    /// CA certificate (PEM) the Redis server's certificate is verified against; requires
    /// TLS (a `redis://` URL is then spoken over TLS).
    #[arg(long, env = "SHOAL_REDIS_TLS_CA")]
    pub redis_tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) for `tls-auth-clients yes`; requires TLS.
    #[arg(long, env = "SHOAL_REDIS_TLS_CERT", requires = "redis_tls_key")]
    pub redis_tls_cert: Option<PathBuf>,
    /// Private key (PEM) of `--redis-tls-cert`.
    #[arg(long, env = "SHOAL_REDIS_TLS_KEY", requires = "redis_tls_cert")]
    pub redis_tls_key: Option<PathBuf>,
    /// Redis ACL user (`AUTH <user> <password>`); without it, `AUTH <password>`.
    #[arg(long, env = "SHOAL_REDIS_USERNAME")]
    pub redis_username: Option<String>,
    /// Redis password. Prefer the environment variable (or the file) to the flag.
    #[arg(long, env = "SHOAL_REDIS_PASSWORD", hide_env_values = true, value_parser = Secret::parse, conflicts_with = "redis_password_file")]
    pub redis_password: Option<Secret>,
    /// File holding the Redis password.
    #[arg(long, env = "SHOAL_REDIS_PASSWORD_FILE")]
    pub redis_password_file: Option<PathBuf>,
}

impl RedisArgs {
    /// The store settings the flags say, the password read from its file.
    pub fn store_config(&self) -> redis::Result<RedisConfig> {
        let tls = TlsFiles {
            ca: self.redis_tls_ca.clone(),
            cert: self.redis_tls_cert.clone(),
            key: self.redis_tls_key.clone(),
        };
        let password = secret(&self.redis_password, &self.redis_password_file, "password")
            .map_err(|(path, reason)| redis::RedisStoreError::Credentials { path, reason })?;
        let mut config = RedisConfig::new(&self.redis_url);
        config.tls = (!tls.is_empty()).then_some(tls);
        config.username = self.redis_username.clone();
        config.password = password;
        Ok(config)
    }
}

impl std::fmt::Debug for RedisArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisArgs")
            .field("redis_url", &redact_url(&self.redis_url))
            .field("redis_tls_ca", &self.redis_tls_ca)
            .field("redis_tls_cert", &self.redis_tls_cert)
            .field("redis_tls_key", &self.redis_tls_key)
            .field("redis_username", &self.redis_username)
            .field("redis_password", &self.redis_password)
            .field("redis_password_file", &self.redis_password_file)
            .finish()
    }
}

/// The secret given directly, else read from its file; the error names the file.
fn secret(
    value: &Option<Secret>,
    file: &Option<PathBuf>,
    what: &'static str,
) -> Result<Option<Secret>, (String, String)> {
    match (value, file) {
        (Some(value), _) => Ok(Some(value.clone())),
        (None, Some(path)) => Secret::read(path).map(Some).map_err(|e| {
            (
                path.display().to_string(),
                format!("reading the {what}: {e}"),
            )
        }),
        (None, None) => Ok(None),
    }
}

fn nats_secret_error((path, reason): (String, String)) -> nats::NatsError {
    nats::NatsError::Credentials { path, reason }
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
    fn jetstream_bounds_from_flags_at_least_a_mebibyte() {
        let args = Shared::try_parse_from(["x"]).unwrap();
        assert_eq!(args.nats.config_kv().max_bytes, 1 << 30);
        assert_eq!(args.nats.push_stream().max_bytes, 256 << 20);
        let args = Shared::try_parse_from([
            "x",
            "--nats-config-max-bytes",
            "33554432",
            "--nats-push-max-bytes",
            "16777216",
        ])
        .unwrap();
        assert_eq!(args.nats.config_kv().max_bytes, 32 << 20);
        assert_eq!(args.nats.push_stream().max_bytes, 16 << 20);
        for flag in ["--nats-config-max-bytes", "--nats-push-max-bytes"] {
            let error = Shared::try_parse_from(["x", flag, "1000"]).unwrap_err();
            assert!(error.to_string().contains("1048576"), "{error}");
        }
    }

    #[test]
    fn tls_and_credentials_from_flags_files_and_never_printed() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "t0ken\n").unwrap();
        let args = Shared::try_parse_from([
            "x",
            "--nats-url",
            "tls://u:url-secret-1@n:1",
            "--nats-tls-ca",
            "/ca.pem",
            "--nats-token-file",
            token.to_str().unwrap(),
            "--redis-url",
            "rediss://:url-secret-2@r:2",
            "--redis-tls-ca",
            "/rca.pem",
            "--redis-username",
            "shoal",
            "--redis-password",
            "hunter2",
        ])
        .unwrap();
        let nats = args.nats.connect_config().unwrap();
        assert_eq!(nats.auth, NatsAuth::Token(Secret::new("t0ken")));
        assert_eq!(nats.tls.unwrap().ca, Some(PathBuf::from("/ca.pem")));
        let redis = args.redis.store_config().unwrap();
        assert_eq!(redis.username.as_deref(), Some("shoal"));
        assert_eq!(redis.password.as_ref().unwrap().expose(), "hunter2");
        let printed = format!("{args:?} {redis:?}");
        // Secrets no temporary path can contain by chance (a tempdir once held "pw").
        for secret in ["url-secret-1", "url-secret-2", "hunter2", "t0ken"] {
            assert!(!printed.contains(secret), "{secret} in {printed}");
        }
        assert!(printed.contains("tls://u:***@n:1"), "{printed}");

        // A password without its user, a certificate without its key: usage errors.
        assert!(Shared::try_parse_from(["x", "--nats-password", "p"]).is_err());
        assert!(Shared::try_parse_from(["x", "--redis-tls-cert", "/c"]).is_err());
        // A secret file that is not there is named.
        let args =
            Shared::try_parse_from(["x", "--redis-password-file", "/nonexistent/pw"]).unwrap();
        let error = args.redis.store_config().unwrap_err().to_string();
        assert!(
            error.starts_with("Redis credentials file /nonexistent/pw: reading the password"),
            "{error}"
        );
    }

    #[test]
    fn durations_as_istio_writes_them() {
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(duration("ten").is_err());
    }
}
