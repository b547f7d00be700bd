//! Connecting: one client per process, reconnecting forever with capped backoff, each
//! connection change logged.

use super::{NatsError, Result};
use async_nats::{Client, ConnectOptions, Event};
use std::time::Duration;

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
        }
    }
}

/// Connects with [`ConnectConfig::default`]. Fails if the first connection fails; later
/// disconnects are retried forever.
pub async fn connect(url: &str) -> Result<Client> {
    connect_with(url, &ConnectConfig::default()).await
}

pub async fn connect_with(url: &str, config: &ConnectConfig) -> Result<Client> {
    let max_delay = config.max_reconnect_delay;
    ConnectOptions::new()
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
            url: url.to_owned(),
            source,
        })
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
