//! Edge membership: each edge heartbeats into the TTL'd membership bucket, and every edge
//! derives the same ring from the live members. A proxy is owned by the member with the
//! highest rendezvous score for its ID, so adding an Nth edge moves ~1/N of proxies.

mod ring;

pub use ring::Ring;

use shoal_proto::transport::{Member, Membership};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tracing::{debug, info, warn};

#[derive(Clone, Debug)]
pub struct MembershipConfig {
    /// How often this edge refreshes its heartbeat and re-reads the members; the bucket's
    /// TTL must be a few times longer.
    pub heartbeat_every: Duration,
}

impl Default for MembershipConfig {
    fn default() -> Self {
        Self {
            heartbeat_every: Duration::from_secs(3),
        }
    }
}

/// Heartbeats `me` until `shutdown`, publishing the ring on every membership change, and
/// leaves the ring on the way out.
pub async fn run(
    config: MembershipConfig,
    membership: Arc<dyn Membership>,
    me: Member,
    ring_tx: watch::Sender<Arc<Ring>>,
    shutdown: impl Future<Output = ()>,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut tick = tokio::time::interval(config.heartbeat_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = tick.tick() => {}
        }
        if let Err(e) = membership.heartbeat(&me).await {
            warn!(error = %e, "membership heartbeat failed; keeping the last ring");
            continue;
        }
        match membership.members().await {
            Ok(mut members) => {
                if !members.iter().any(|m| m.id == me.id) {
                    members.push(me.clone());
                }
                let ring = Ring::new(members);
                ring_tx.send_if_modified(|current| {
                    if current.members() == ring.members() {
                        return false;
                    }
                    info!(members = ring.members().len(), "edge ring changed");
                    *current = Arc::new(ring);
                    true
                });
            }
            Err(e) => debug!(error = %e, "reading members failed; keeping the last ring"),
        }
    }
    if let Err(e) = membership.leave(&me.id).await {
        debug!(error = %e, "leaving the ring failed; the heartbeat will expire");
    }
}
