//! Handing proxies to other edges: each stream named ends with a retryable UNAVAILABLE,
//! at a pace, so the proxies reconnect (through the edge Service) a few at a time and
//! keep their config meanwhile (Envoy holds the last one it accepted).

use super::server::XdsServer;
use crate::placement::Pacer;
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

    /// Hands off `proxies` (those still connected) at `pacer`'s pace; returns how many
    /// were handed off.
    pub async fn hand_off(&self, proxies: Vec<String>, pacer: &mut Pacer) -> usize {
        let mut handed = 0;
        for proxy in proxies {
            loop {
                let now = std::time::Instant::now();
                if pacer.take(now, 1) == 1 {
                    break;
                }
                tokio::time::sleep(pacer.wait(now).max(Duration::from_millis(1))).await;
            }
            let local = self
                .shared
                .registry
                .proxy(&proxy)
                .map(|conn| conn.hand_off());
            if local.is_some() || self.shared.relays.hand_off(&proxy) {
                self.shared.metrics.handoffs.inc();
                handed += 1;
            }
        }
        handed
    }

    /// The proxies to move under `ring`: those placed here whose owner is now another
    /// edge, and relayed ones whose owner changed (or is now this edge).
    pub fn to_rebalance(&self, ring: &crate::membership::Ring) -> Vec<String> {
        let Some(placement) = self.shared.placement.get() else {
            return Vec::new();
        };
        let me = placement.me.as_str();
        let mut moving: Vec<String> = self
            .shared
            .registry
            .placed_here()
            .into_iter()
            .filter(|c| !ring.owns(me, &c.proxy.id))
            .map(|c| c.proxy.id.clone())
            .collect();
        moving.extend(
            self.shared
                .relays
                .streams()
                .into_iter()
                .filter(|(proxy, owner)| ring.owner(proxy).is_none_or(|m| m.id != *owner))
                .map(|(proxy, _)| proxy),
        );
        moving
    }

    /// Drain: refuses new streams and hands off every proxy held, spread over `window`
    /// (at least `min_rate` per second), then waits (within `window`) for their streams
    /// to end.
    pub async fn drain_streams(&self, window: Duration, min_rate: f64) {
        self.stop_accepting();
        let deadline = Instant::now() + window;
        let mut proxies = self.shared.registry.proxy_ids();
        proxies.extend(
            self.shared
                .relays
                .streams()
                .into_iter()
                .map(|(proxy, _)| proxy),
        );
        let total = proxies.len();
        let rate = (total as f64 / window.as_secs_f64().max(0.001)).max(min_rate);
        // Bursts of a tenth of a second's worth keep the pace smooth.
        let mut pacer = Pacer::new(rate, (rate / 10.0).ceil() as usize);
        info!(
            proxies = total,
            rate,
            ?window,
            "draining: handing off every proxy"
        );
        let handed = self.hand_off(proxies, &mut pacer).await;
        while (self.shared.registry.len() > 0 || self.shared.relays.len() > 0)
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        info!(
            handed,
            left = self.shared.registry.len(),
            "draining: hand-off done"
        );
    }
}
