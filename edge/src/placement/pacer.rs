//! A token bucket over caller-supplied time, so pacing is tested without a clock.

use std::time::{Duration, Instant};

/// Releases up to `rate` items per second, with bursts of up to `burst`.
#[derive(Clone, Debug)]
pub struct Pacer {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl Pacer {
    /// `rate` per second (at least one), bursts of `burst` (at least one). It starts
    /// full.
    pub fn new(rate: f64, burst: usize) -> Self {
        let burst = burst.max(1) as f64;
        Pacer {
            rate: rate.max(f64::MIN_POSITIVE),
            burst,
            tokens: burst,
            last: None,
        }
    }

    fn refill(&mut self, now: Instant) {
        if let Some(last) = self.last {
            let elapsed = now.saturating_duration_since(last).as_secs_f64();
            self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        }
        self.last = Some(now);
    }

    /// Takes up to `want` tokens at `now`; returns how many were granted.
    pub fn take(&mut self, now: Instant, want: usize) -> usize {
        self.refill(now);
        let n = (self.tokens.floor() as usize).min(want);
        self.tokens -= n as f64;
        n
    }

    /// How long from `now` until one token is available.
    pub fn wait(&self, now: Instant) -> Duration {
        let elapsed = self
            .last
            .map(|l| now.saturating_duration_since(l).as_secs_f64())
            .unwrap_or(0.0);
        let tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        if tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - tokens) / self.rate)
        }
    }
}
