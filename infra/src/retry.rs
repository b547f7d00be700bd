//! Retrying transport calls: exponential backoff while the transport is `Unavailable`,
//! reset on success; every other error is returned at once. One span per attempt; the
//! caller counts retries in its own metrics (`on_retry`).

use shoal_proto::transport::TransportError;
use std::future::Future;
use std::time::Duration;
use tracing::Instrument;

/// Backoff bounds for retried calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryConfig {
    /// The first delay; doubled on each further failure.
    pub min: Duration,
    /// The longest delay between attempts.
    pub max: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            min: Duration::from_millis(100),
            max: Duration::from_secs(5),
        }
    }
}

/// Exponential backoff between `min` and `max`.
#[derive(Clone, Debug)]
pub struct Backoff {
    config: RetryConfig,
    next: Duration,
}

impl Backoff {
    pub fn new(config: RetryConfig) -> Self {
        Self {
            next: config.min,
            config,
        }
    }

    /// The delay before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.config.max).max(self.config.min);
        delay
    }
}

/// Runs `call` until it succeeds or fails with something other than `Unavailable`,
/// calling `on_retry` before each new attempt. Each attempt runs in its own span; `op`
/// names the call in logs.
pub async fn retry<T, F, Fut>(
    op: &'static str,
    config: RetryConfig,
    mut on_retry: impl FnMut(),
    mut call: F,
) -> Result<T, TransportError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, TransportError>>,
{
    let mut backoff = Backoff::new(config);
    let mut attempt = 1u32;
    loop {
        let span = tracing::debug_span!("attempt", op, attempt);
        match call().instrument(span).await {
            Err(TransportError::Unavailable(what, why)) => {
                let delay = backoff.next_delay();
                tracing::warn!(op, attempt, ?delay, "{what} unavailable: {why}; retrying");
                on_retry();
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn backoff_doubles_up_to_max() {
        let mut b = Backoff::new(RetryConfig {
            min: Duration::from_millis(100),
            max: Duration::from_millis(350),
        });
        let delays: Vec<_> = (0..4).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(delays, [100, 200, 350, 350]);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_unavailable_and_returns_other_errors() {
        let mut retries = 0;
        let calls = AtomicU32::new(0);
        let start = tokio::time::Instant::now();
        let out = retry(
            "put",
            RetryConfig::default(),
            || retries += 1,
            || async {
                match calls.fetch_add(1, Ordering::SeqCst) {
                    0 | 1 => Err(TransportError::Unavailable("kv", "down".into())),
                    _ => Ok(7),
                }
            },
        )
        .await;
        assert_eq!(out.unwrap(), 7);
        assert_eq!(start.elapsed(), Duration::from_millis(300));
        assert_eq!(retries, 2);

        let out: Result<(), _> = retry(
            "put",
            RetryConfig::default(),
            || retries += 1,
            || async { Err(TransportError::Codec("bad".into())) },
        )
        .await;
        assert!(matches!(out, Err(TransportError::Codec(_))));
        assert_eq!(retries, 2);
    }
}
