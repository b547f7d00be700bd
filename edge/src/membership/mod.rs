//! Edge membership: each edge heartbeats into the TTL'd membership bucket and follows it
//! with a watch, so every edge derives the same ring from the live members within a
//! round trip of a change. A proxy is owned by the member with the highest rendezvous
//! score for its ID, so adding an Nth edge moves ~1/N of proxies.
//!
//! ```text
//!  heartbeat (register) ─► watch: replay every member ─► Current ─► first ring (ready)
//!        ▲ every heartbeat_every          │ beats / leaves as they happen ─► ring
//!        └── a lost watch: beat, watch again (its replay refreshes the members)
//! ```

mod ring;
mod view;

pub use ring::Ring;
pub use view::View;

use futures::StreamExt;
use shoal_proto::transport::{Member, MemberEvent, Membership};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

#[derive(Clone, Debug)]
pub struct MembershipConfig {
    /// How often this edge refreshes its heartbeat (members are followed by a watch); the bucket's
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

/// Heartbeats `me` until `shutdown` and publishes the ring on every membership change;
/// the first ring is published once the members are read after `me` registered (until
/// then the ring is empty: the edge is not ready). Leaves the ring on the way out.
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
    let mut view = View::new(me.clone());
    'rewatch: loop {
        // Registered first, so the replay that makes the ring includes this edge's beat.
        loop {
            tokio::select! {
                _ = &mut shutdown => break 'rewatch,
                _ = tick.tick() => {}
            }
            match membership.heartbeat(&me).await {
                Ok(()) => break,
                Err(e) => warn!(error = %e, "membership heartbeat failed; keeping the last ring"),
            }
        }
        let mut events = match membership.watch().await {
            Ok(events) => events,
            Err(e) => {
                warn!(error = %e, "watching the members failed; keeping the last ring");
                continue;
            }
        };
        // This edge's own beats come back through the watch; a watch that stops echoing
        // them (its server restarted and lost the bucket, and the watch did not notice) is
        // replaced.
        let mut echoed = Instant::now();
        loop {
            let expiry = view.next_expiry();
            tokio::select! {
                _ = &mut shutdown => break 'rewatch,
                _ = tick.tick() => {
                    if let Err(e) = membership.heartbeat(&me).await {
                        warn!(error = %e, "membership heartbeat failed; watching again");
                        continue 'rewatch;
                    }
                    if echoed.elapsed() > config.heartbeat_every * 3 {
                        warn!("the membership watch stopped reporting this edge's beats; watching again");
                        continue 'rewatch;
                    }
                }
                _ = async {
                    match expiry {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => view.expire(Instant::now()),
                event = events.next() => match event {
                    Some(Ok(event)) => {
                        if matches!(&event, MemberEvent::Beat { member, .. } if member.id == me.id) {
                            echoed = Instant::now();
                        }
                        view.apply(event, Instant::now());
                    }
                    Some(Err(e)) => {
                        warn!(error = %e, "the membership watch failed; watching again");
                        continue 'rewatch;
                    }
                    None => {
                        warn!("the membership watch ended; watching again");
                        continue 'rewatch;
                    }
                },
            }
            publish(&view, &ring_tx);
        }
    }
    if let Err(e) = membership.leave(&me.id).await {
        tracing::debug!(error = %e, "leaving the ring failed; the heartbeat will expire");
    }
}

/// Sends the view's ring when its members changed.
fn publish(view: &View, ring_tx: &watch::Sender<Arc<Ring>>) {
    let Some(ring) = view.ring() else {
        return;
    };
    ring_tx.send_if_modified(|current| {
        if current.members() == ring.members() {
            return false;
        }
        let first = current.members().is_empty();
        info!(members = ring.members().len(), first, "edge ring changed");
        *current = Arc::new(ring);
        true
    });
}

/// Resolves once `ring` holds the members read after this edge registered.
pub async fn known(ring: &mut watch::Receiver<Arc<Ring>>) -> bool {
    ring.wait_for(|r| !r.members().is_empty()).await.is_ok()
}

#[cfg(test)]
mod tests;
