//! Connecting: one client per process, reconnecting forever with capped backoff, each
//! connection change logged; over TLS and with credentials where configured.

use super::{NatsError, Result};
use crate::secret::{Secret, redact_urls};
use crate::tls::TlsFiles;
use async_nats::{Client, ConnectErrorKind, ConnectOptions, Event};
use std::path::PathBuf;
use std::time::Duration;

/// How the client proves who it is to the server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum NatsAuth {
    /// None, or what the URL's userinfo carries (`nats://user:pass@host`).
    #[default]
    None,
    UserPassword {
        user: String,
        password: Secret,
    },
    Token(Secret),
    /// A NATS `.creds` file (user JWT and NKey seed), as `nsc` writes it.
    CredsFile(PathBuf),
}

impl NatsAuth {
    fn describe(&self) -> &'static str {
        match self {
            NatsAuth::None => "no credentials",
            NatsAuth::UserPassword { .. } => "user and password",
            NatsAuth::Token(_) => "token",
            NatsAuth::CredsFile(_) => "creds file",
        }
    }
}

/// Connection settings; `Default` suits every tier.
#[derive(Clone, Debug)]
pub struct ConnectConfig {
    /// Client name the server shows in its monitoring (`connz`).
    pub name: String,
    pub connection_timeout: Duration,
    /// Timeout of request/reply calls (JetStream API, publish acks).
    pub request_timeout: Duration,
    /// Cap of the exponential reconnect backoff (from 100 ms).
    pub max_reconnect_delay: Duration,
    /// Messages buffered per subscription before the client drops them (slow consumer).
    pub subscription_capacity: usize,
    pub ping_interval: Duration,
    /// TLS is required when set (even on a `nats://` URL); the CA, when given, is the only
    /// root the server's certificate is verified against. A `tls://` URL requires TLS too,
    /// with the system's roots unless a CA is given.
    pub tls: Option<TlsFiles>,
    pub auth: NatsAuth,
}

impl Default for ConnectConfig {
    fn default() -> Self {
        Self {
            name: "shoal".into(),
            connection_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            max_reconnect_delay: Duration::from_secs(5),
            subscription_capacity: 8192,
            ping_interval: Duration::from_secs(10),
            tls: None,
            auth: NatsAuth::None,
        }
    }
}

/// Connects with [`ConnectConfig::default`]. Fails if the first connection fails; later
/// disconnects are retried forever.
pub async fn connect(url: &str) -> Result<Client> {
    connect_with(url, &ConnectConfig::default()).await
}

pub async fn connect_with(url: &str, config: &ConnectConfig) -> Result<Client> {
    let shown = redact_urls(url);
    let max_delay = config.max_reconnect_delay;
    let mut options = ConnectOptions::new();
    if let Some(files) = &config.tls {
        // Read and checked here so a bad file is named; the library reads them again.
        files.load("NATS").map_err(|source| NatsError::Tls {
            url: shown.clone(),
            source,
        })?;
        options = options.require_tls(true);
        if let Some(ca) = &files.ca {
            options = options.add_root_certificates(ca.clone());
        }
        if let (Some(cert), Some(key)) = (&files.cert, &files.key) {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
    }
    options = match &config.auth {
        NatsAuth::None => options,
        NatsAuth::UserPassword { user, password } => {
            options.user_and_password(user.clone(), password.expose().to_owned())
        }
        NatsAuth::Token(token) => options.token(token.expose().to_owned()),
        NatsAuth::CredsFile(path) => {
            options
                .credentials_file(path)
                .await
                .map_err(|e| NatsError::Credentials {
                    path: path.display().to_string(),
                    reason: format!("reading the creds: {e}"),
                })?
        }
    };
    options
        .name(&config.name)
        .connection_timeout(config.connection_timeout)
        .request_timeout(Some(config.request_timeout))
        .subscription_capacity(config.subscription_capacity)
        .ping_interval(config.ping_interval)
        .max_reconnects(None)
        .reconnect_delay_callback(move |attempts| backoff(attempts, max_delay))
        .event_callback(|event| async move { log_event(event) })
        .connect(url)
        .await
        .map_err(|source| NatsError::Connect {
            url: shown,
            reason: reason(&source, config),
        })
}

/// What failed, in words an operator can act on: the library's message alone does not say
/// whether TLS or the credentials were the problem.
fn reason(error: &async_nats::ConnectError, config: &ConnectConfig) -> String {
    let tls = if config.tls.is_some() {
        "TLS"
    } else {
        "plaintext"
    };
    match error.kind() {
        _ if error.kind() == ConnectErrorKind::Tls || crate::tls::refused(error) => {
            format!("TLS handshake failed: {error}")
        }
        ConnectErrorKind::AuthorizationViolation | ConnectErrorKind::Authentication => format!(
            "authentication refused by the server ({} given): {error}",
            config.auth.describe()
        ),
        _ => format!("{error} ({tls}, {})", config.auth.describe()),
    }
}

/// 100 ms doubling per attempt, capped; the first retry is immediate.
fn backoff(attempts: usize, max: Duration) -> Duration {
    if attempts <= 1 {
        return Duration::ZERO;
    }
    let exp = u32::try_from(attempts - 2).unwrap_or(u32::MAX).min(16);
    Duration::from_millis(100).saturating_mul(1 << exp).min(max)
}

fn log_event(event: Event) {
    match event {
        Event::Connected => tracing::info!("nats connected"),
        Event::Disconnected => tracing::warn!("nats disconnected; reconnecting"),
        Event::SlowConsumer(sid) => {
            tracing::warn!(sid, "nats slow consumer: messages dropped")
        }
        other => tracing::info!(event = %other, "nats event"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_then_caps() {
        let max = Duration::from_secs(5);
        assert_eq!(backoff(1, max), Duration::ZERO);
        assert_eq!(backoff(2, max), Duration::from_millis(100));
        assert_eq!(backoff(3, max), Duration::from_millis(200));
        assert_eq!(backoff(10, max), max);
        assert_eq!(backoff(usize::MAX, max), max);
    }
}
