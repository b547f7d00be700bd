//! Placement, without I/O: under a ring, which of the proxies connected here this edge
//! owns, which must move to another edge (and which relays lead to an edge that no
//! longer owns their proxy), and at what pace. The rebalance task (`rebalance.rs`) and
//! the drain feed it ring changes and what is connected, and act on what it returns.
//!
//! ```text
//!  ring change / rehome tick / drain ──► Handoff ──► next_batch(now) ──► close (retryable)
//!  (served here, relayed: proxy → owner)    │
//!                                      Pacer: token bucket, `--handoff-rate` per second
//! ```

mod pacer;

pub use pacer::Pacer;

use crate::membership::Ring;
use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

/// The proxies connected here, split by who owns them under a ring.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split {
    pub owned: BTreeSet<String>,
    /// Owned by another live edge: to be handed off.
    pub foreign: BTreeSet<String>,
}

/// The relayed proxies among `relayed` (`(proxy, owner relayed to)`) whose owner under
/// `ring` is no longer the edge they are relayed to (it left, or another edge, or this
/// one, owns them now).
pub fn moved_relays<'a>(
    ring: &Ring,
    relayed: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> BTreeSet<String> {
    relayed
        .into_iter()
        .filter(|(proxy, owner)| ring.owner(proxy).is_none_or(|m| m.id != *owner))
        .map(|(proxy, _)| proxy.to_string())
        .collect()
}

/// Splits `connected` proxies by owner under `ring`. A proxy is owned here when the ring
/// names this edge, or is empty (an edge alone, or not yet in the ring, serves all).
pub fn split<'a>(ring: &Ring, me: &str, connected: impl IntoIterator<Item = &'a str>) -> Split {
    let mut out = Split::default();
    for proxy in connected {
        if ring.owns(me, proxy) {
            out.owned.insert(proxy.to_string());
        } else {
            out.foreign.insert(proxy.to_string());
        }
    }
    out
}

/// The `connected` proxies another edge owns under `ring` (what [`split`] calls foreign,
/// without copying the owned ones: every proxy an edge holds on each ring change).
pub fn foreign<'a>(
    ring: &Ring,
    me: &str,
    connected: impl IntoIterator<Item = &'a str>,
) -> BTreeSet<String> {
    connected
        .into_iter()
        .filter(|proxy| !ring.owns(me, proxy))
        .map(str::to_string)
        .collect()
}

/// The handoff plan of one edge: the proxies it must move, in order, released at a
/// paced rate.
#[derive(Debug)]
pub struct Handoff {
    me: String,
    ring: Ring,
    /// Proxies to move, oldest first; each at most once.
    pending: VecDeque<String>,
    queued: BTreeSet<String>,
    pacer: Pacer,
    /// Set by [`Handoff::drain`]: every proxy moves, whoever owns it.
    draining: bool,
}

impl Handoff {
    pub fn new(me: impl Into<String>, pacer: Pacer) -> Self {
        Handoff {
            me: me.into(),
            ring: Ring::default(),
            pending: VecDeque::new(),
            queued: BTreeSet::new(),
            pacer,
            draining: false,
        }
    }

    /// A new ring (or the same, to re-plan): re-plans every proxy served here
    /// (`connected`) and every relayed one (`relayed`: `(proxy, owner relayed to)`).
    /// Proxies this edge owns again, and relays whose owner is unchanged, leave the plan;
    /// newly foreign proxies and relays to an edge that no longer owns them join it.
    pub fn on_ring<'a>(
        &mut self,
        ring: Ring,
        connected: impl IntoIterator<Item = &'a str>,
        relayed: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) {
        self.ring = ring;
        let mut moving = foreign(&self.ring, &self.me, connected);
        moving.extend(moved_relays(&self.ring, relayed));
        self.pending.retain(|p| moving.contains(p));
        self.queued.retain(|p| moving.contains(p));
        for proxy in moving {
            self.queue(proxy);
        }
    }

    /// This edge drains: every proxy it holds (served or relayed) moves, at the pace.
    pub fn drain<'a>(&mut self, held: impl IntoIterator<Item = &'a str>) {
        self.draining = true;
        for proxy in held {
            self.queue(proxy.to_string());
        }
    }

    fn queue(&mut self, proxy: String) {
        if self.queued.insert(proxy.clone()) {
            self.pending.push_back(proxy);
        }
    }

    /// A proxy connected here: planned for a move if another edge owns it.
    pub fn on_connect(&mut self, proxy: &str) {
        if !self.ring.owns(&self.me, proxy) {
            self.queue(proxy.to_string());
        }
    }

    /// A proxy disconnected: nothing left to move.
    pub fn on_disconnect(&mut self, proxy: &str) {
        if self.queued.remove(proxy) {
            self.pending.retain(|p| p != proxy);
        }
    }

    /// The proxies to move now, as many as the pace allows.
    pub fn next_batch(&mut self, now: Instant) -> Vec<String> {
        let n = self.pacer.take(now, self.pending.len());
        let batch: Vec<String> = self.pending.drain(..n).collect();
        for proxy in &batch {
            self.queued.remove(proxy);
        }
        batch
    }

    /// How long until the next proxy may move; `None` when none waits.
    pub fn next_in(&self, now: Instant) -> Option<Duration> {
        (!self.pending.is_empty()).then(|| self.pacer.wait(now))
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    /// Draining: a proxy released moves whoever owns it (else only if it still must).
    pub fn draining(&self) -> bool {
        self.draining
    }
}

#[cfg(test)]
mod tests;
