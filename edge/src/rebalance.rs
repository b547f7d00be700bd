//! The rebalance task: moves the proxies this edge serves but no longer owns, and ends
//! the relays that lead to an edge that no longer owns their proxy.
//!
//! ```text
//!  ring change ──► wait one heartbeat (every edge holds the new ring) ──┐
//!  every --rehome-interval (proxies served away from an owner that     ├─► Handoff::on_ring (re-plan)
//!      could not be reached when they connected) ─────────────────────┘        │
//!                                                    next_batch, paced ◄────────┘
//!                                                    ──► end those streams (retryable)
//! ```

use crate::ads::XdsServer;
use crate::membership::Ring;
use crate::placement::{Handoff, Pacer};
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
    let Some(me) = xds.member_id().map(str::to_string) else {
        return;
    };
    let mut plan = Handoff::new(
        me,
        Pacer::new(config.rate, (config.rate / 10.0).ceil() as usize),
    );
    let mut shutdown = std::pin::pin!(shutdown);
    let mut rehome = (!config.rehome_every.is_zero()).then(|| {
        let every = config.rehome_every;
        let mut rehome = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        rehome.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        rehome
    });
    let mut handed = 0;
    loop {
        let next = plan.next_in(std::time::Instant::now());
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
            _ = async {
                match next {
                    Some(wait) => tokio::time::sleep(wait.max(Duration::from_millis(1))).await,
                    None => std::future::pending().await,
                }
            } => {
                handed += xds.hand_off_batch(&mut plan);
                if plan.pending() == 0 {
                    info!(handed, "rebalance done");
                    handed = 0;
                }
                continue;
            }
        };
        let current = ring.borrow_and_update().clone();
        xds.forget_departed(&current);
        xds.plan(&mut plan, Ring::clone(&current));
        if plan.pending() == 0 {
            continue;
        }
        info!(
            proxies = plan.pending(),
            members = current.members().len(),
            "{why}"
        );
        handed += xds.hand_off_batch(&mut plan);
    }
}
