//! Placement, without I/O: under a ring, which of the proxies connected here this edge
//! owns, which must move to another edge, and at what pace. The handoff task feeds it
//! ring changes and connections and acts on what it returns.
//!
//! ```text
//!  ring change / connect / disconnect ──► Handoff ──► next_batch(now) ──► close (retryable)
//!                                           │
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
}

impl Handoff {
    pub fn new(me: impl Into<String>, pacer: Pacer) -> Self {
        Handoff {
            me: me.into(),
            ring: Ring::default(),
            pending: VecDeque::new(),
            queued: BTreeSet::new(),
            pacer,
        }
    }

    /// A new ring: re-plans every connected proxy. Proxies this edge owns again leave the
    /// plan; newly foreign ones join it.
    pub fn on_ring<'a>(&mut self, ring: Ring, connected: impl IntoIterator<Item = &'a str>) {
        self.ring = ring;
        let split = split(&self.ring, &self.me, connected);
        self.pending.retain(|p| split.foreign.contains(p));
        self.queued.retain(|p| split.foreign.contains(p));
        for proxy in split.foreign {
            if self.queued.insert(proxy.clone()) {
                self.pending.push_back(proxy);
            }
        }
    }

    /// A proxy connected here: planned for a move if another edge owns it.
    pub fn on_connect(&mut self, proxy: &str) {
        if !self.ring.owns(&self.me, proxy) && self.queued.insert(proxy.to_string()) {
            self.pending.push_back(proxy.to_string());
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
}

#[cfg(test)]
mod tests;
