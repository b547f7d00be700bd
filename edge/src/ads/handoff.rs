//! Handing proxies to other edges: each stream named ends with a retryable UNAVAILABLE,
//! at a pace, so the proxies reconnect (through the edge Service) a few at a time and
//! keep their config meanwhile (Envoy holds the last one it accepted). What moves and
//! when is planned by [`Handoff`] (pure); this acts on its batches.

use super::error::Ending;
use super::server::XdsServer;
use crate::membership::Ring;
use crate::placement::{Handoff, Pacer};
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::time::Instant;
use tracing::info;

impl XdsServer {
    /// Stops taking new streams (they are refused with a retryable status); the ones held
    /// go on until handed off or drained.
    pub fn stop_accepting(&self) {
        self.shared.refusing.store(true, Ordering::Release);
    }

    /// This edge's member ID in the ring; `None` when it does not own by ring.
    pub(crate) fn member_id(&self) -> Option<&str> {
        self.shared.placement.get().map(|p| p.me.as_str())
    }

    /// Re-plans `plan` under `ring` with what this edge holds: the proxies it placed here
    /// (not relayed in) and the streams it relays.
    pub(crate) fn plan(&self, plan: &mut Handoff, ring: Ring) {
        let placed = self.shared.registry.placed_here();
        let relayed = self.shared.relays.streams();
        plan.on_ring(
            ring,
            placed.iter().map(|c| c.proxy.id.as_str()),
            relayed.iter().map(|(p, o)| (&**p, &**o)),
        );
    }

    /// Hands off the proxies `plan` releases now; returns how many streams it ended. Out
    /// of a drain, a proxy moves only if it still must under the plan's ring (it may have
    /// reconnected to the right edge meanwhile).
    pub(crate) fn hand_off_batch(&self, plan: &mut Handoff) -> usize {
        let now = std::time::Instant::now();
        let mut handed = 0;
        for proxy in plan.next_batch(now) {
            let moved = if plan.draining() {
                self.hand_off(&proxy)
            } else {
                self.hand_off_if_moved(&proxy, plan.ring())
            };
            if moved {
                self.shared.metrics.handoffs.inc();
                handed += 1;
            }
        }
        handed
    }

    /// Ends every stream of `proxy` here, served or relayed.
    fn hand_off(&self, proxy: &str) -> bool {
        let served = self.shared.registry.proxy(proxy).map(|c| c.hand_off());
        let relayed = self.shared.relays.end(proxy, Ending::HandedOff);
        served.is_some() || relayed
    }

    /// Ends the stream of `proxy` placed here if another edge owns it under `ring`, and
    /// its relays to an edge that no longer owns it.
    fn hand_off_if_moved(&self, proxy: &str, ring: &Ring) -> bool {
        let Some(me) = self.member_id() else {
            return false;
        };
        let served = match self.shared.registry.proxy(proxy) {
            Some(c) if !c.relayed_in && !ring.owns(me, proxy) => {
                c.hand_off();
                true
            }
            _ => false,
        };
        let owner = ring.owner(proxy).map(|m| m.id.as_str());
        let relayed = self
            .shared
            .relays
            .end_unless_to(proxy, owner, Ending::HandedOff);
        served || relayed
    }

    /// Forgets the relay connections to edges that left `ring`.
    pub(crate) fn forget_departed(&self, ring: &Ring) {
        self.shared.relays.retain_connections(ring);
    }

    /// Drain: refuses new streams and hands off every proxy held, spread over `window`
    /// (at least `min_rate` per second), then waits (within `window`) for their streams
    /// to end.
    pub async fn drain_streams(&self, window: Duration, min_rate: f64) {
        self.stop_accepting();
        let deadline = Instant::now() + window;
        let mut held = self.shared.registry.proxy_ids();
        held.extend(
            self.shared
                .relays
                .streams()
                .into_iter()
                .map(|(p, _)| p.to_string()),
        );
        let rate = (held.len() as f64 / window.as_secs_f64().max(0.001)).max(min_rate);
        // Bursts of a tenth of a second's worth keep the pace smooth.
        let pacer = Pacer::new(rate, (rate / 10.0).ceil() as usize);
        let mut plan = Handoff::new(self.member_id().unwrap_or_default(), pacer);
        plan.drain(held.iter().map(String::as_str));
        info!(
            proxies = plan.pending(),
            rate,
            ?window,
            "draining: handing off every proxy"
        );
        let mut handed = 0;
        loop {
            handed += self.hand_off_batch(&mut plan);
            match plan.next_in(std::time::Instant::now()) {
                Some(wait) => tokio::time::sleep(wait.max(Duration::from_millis(1))).await,
                None => break,
            }
        }
        while (self.shared.registry.len() > 0 || self.shared.relays.len() > 0)
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        info!(
            handed,
            left = self.shared.registry.len() + self.shared.relays.len(),
            "draining: hand-off done"
        );
    }
}
