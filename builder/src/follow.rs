//! The replica follower: lists, then watches, the config KV and feeds every entry to the
//! build loop, which owns the replica. A build never holds anything the follower needs:
//! entries that arrive during one wait in a bounded channel.

use futures::StreamExt;
use shoal_infra::retry::{Backoff, RetryConfig};
use shoal_proto::transport::{ConfigKv, KvEntry};
use std::sync::Arc;
use tokio::sync::mpsc;
use tracing::{info, warn};

/// What the follower hands the build loop.
#[derive(Debug)]
pub(crate) enum Feed {
    /// A complete listing: once applied, the replica is synced.
    Listed(Vec<KvEntry>),
    /// One change after the listing, in revision order.
    Entry(KvEntry),
}

/// Follows `kv` until the build loop is gone, resyncing with backoff on any error.
pub(crate) async fn follow(kv: Arc<dyn ConfigKv>, feed: mpsc::Sender<Feed>) {
    let mut backoff = Backoff::new(RetryConfig::default());
    loop {
        // The listing marks the replica synced; the watch then replays (ignored as
        // already held) and follows.
        let listed = match kv.entries().await {
            Ok(entries) => entries,
            Err(e) => {
                let wait = backoff.next_delay();
                warn!(error = %e, ?wait, "config KV unavailable; retrying");
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        let mut stream = match kv.watch().await {
            Ok(s) => s,
            Err(e) => {
                let wait = backoff.next_delay();
                warn!(error = %e, ?wait, "config KV watch failed; retrying");
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        info!(entries = listed.len(), "config KV listed");
        if feed.send(Feed::Listed(listed)).await.is_err() {
            return;
        }
        backoff = Backoff::new(RetryConfig::default());
        while let Some(item) = stream.next().await {
            match item {
                Ok(entry) => {
                    if feed.send(Feed::Entry(entry)).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    warn!(error = %e, "config KV watch interrupted; resyncing");
                    break;
                }
            }
        }
        if feed.is_closed() {
            return;
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}
