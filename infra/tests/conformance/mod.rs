//! Behavioural checks written once against the `shoal_proto::transport` traits and run
//! against both the real adapters (`tests/nats.rs`, `tests/redis.rs`) and the in-process
//! twins (`tests/memory.rs`), so the twins provably behave like NATS and Redis.
// Each test binary uses a subset of these checks.
#![allow(dead_code)]

pub mod bus;
pub mod kv;
pub mod membership;
pub mod store;

use futures::{Stream, StreamExt};
use std::time::Duration;

/// Generous for a loaded 2-core CI machine; a passing test never waits this long.
pub const WAIT: Duration = Duration::from_secs(10);

/// The next item of `stream`, failing the test if none comes within [`WAIT`].
pub async fn next<S: Stream + Unpin>(stream: &mut S, what: &str) -> S::Item {
    tokio::time::timeout(WAIT, stream.next())
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .unwrap_or_else(|| panic!("stream ended while waiting for {what}"))
}

/// Asserts nothing arrives on `stream` for `quiet`.
pub async fn nothing_within<S: Stream + Unpin>(stream: &mut S, quiet: Duration, what: &str) {
    if let Ok(item) = tokio::time::timeout(quiet, stream.next()).await {
        let ended = if item.is_none() {
            " (stream ended)"
        } else {
            ""
        };
        panic!("expected no {what}, but one arrived{ended}");
    }
}

/// Polls `check` until it holds or `deadline` passes.
pub async fn eventually<F, Fut>(deadline: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = tokio::time::Instant::now() + deadline;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < until,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
