//! The rebalance task: moves the proxies this edge serves but no longer owns.
//!
//! ```text
//!  ring change ──► wait one heartbeat (every edge holds the new ring) ──┐
//!  every --rehome-interval (proxies served away from an owner that     ├─► to_rebalance ──► hand_off, paced
//!      could not be reached when they connected) ─────────────────────┘
//! ```

use crate::ads::XdsServer;
use crate::membership::Ring;
use crate::placement::Pacer;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tracing::info;

/// When and how fast the rebalance task moves proxies.
#[derive(Clone, Debug)]
pub(crate) struct RebalanceConfig {
    /// Proxies handed off per second.
    pub rate: f64,
    /// How long after a ring change to start: one membership heartbeat, so that every
    /// edge reads the new members first and a moved proxy is not relayed to its old
    /// owner by an edge that has not caught up (and moved a second time).
    pub settle: Duration,
    /// How often to send home the proxies served here whose owner is another edge;
    /// zero: only on ring changes.
    pub rehome_every: Duration,
}

/// Runs until `shutdown` (or the ring's sender is gone).
pub(crate) async fn run(
    xds: XdsServer,
    mut ring: watch::Receiver<Arc<Ring>>,
    config: RebalanceConfig,
    shutdown: impl Future<Output = ()>,
) {
    let mut pacer = Pacer::new(config.rate, (config.rate / 10.0).ceil() as usize);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut rehome = (!config.rehome_every.is_zero()).then(|| {
        let every = config.rehome_every;
        let mut rehome = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        rehome.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        rehome
    });
    loop {
        let why = tokio::select! {
            _ = &mut shutdown => return,
            changed = ring.changed() => {
                if changed.is_err() {
                    return;
                }
                tokio::select! {
                    _ = &mut shutdown => return,
                    _ = tokio::time::sleep(config.settle) => {}
                }
                "ring changed: handing off the proxies another edge now owns"
            }
            _ = async {
                match rehome.as_mut() {
                    Some(rehome) => {
                        rehome.tick().await;
                    }
                    None => std::future::pending().await,
                }
            } => "sending home the proxies served here for another edge",
        };
        let current = ring.borrow_and_update().clone();
        let moving = xds.to_rebalance(&current);
        if moving.is_empty() {
            continue;
        }
        info!(
            proxies = moving.len(),
            members = current.members().len(),
            "{why}"
        );
        tokio::select! {
            _ = &mut shutdown => return,
            handed = xds.hand_off(moving, &mut pacer) => info!(handed, "rebalance done"),
        }
    }
}
