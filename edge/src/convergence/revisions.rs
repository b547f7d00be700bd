//! The revisions one queued push answers for: each settled exactly once, by the stream
//! (sent, then ACKed or NACKed) or, when the token is dropped unsettled (the stream ended,
//! the queue closed), counted as gone.

use super::ledger::{Ledger, NackSample};
use smallvec::{SmallVec, smallvec};
use std::sync::Arc;

/// Revisions one proxy was concerned by and has not answered yet, oldest first, each
/// with whether it was sent. Bounded by the ledger's capacity: more distinct versions
/// than it keeps means the oldest are forgotten there anyway.
#[derive(Debug, Default)]
pub struct Revisions {
    ledger: Option<Arc<Ledger>>,
    /// Inline for the usual one or two: a change concerning 100k proxies allocates
    /// nothing per proxy.
    versions: SmallVec<[(u64, bool); 2]>,
}

impl Revisions {
    /// Tracks nothing (a push no revision waits on: tests, benches, the first response).
    pub fn none() -> Self {
        Revisions::default()
    }

    /// `version` concerned a proxy; `ledger` counted it as concerned.
    pub fn concerned(ledger: &Arc<Ledger>, version: u64) -> Self {
        Revisions {
            ledger: Some(ledger.clone()),
            versions: smallvec![(version, false)],
        }
    }

    pub fn is_empty(&self) -> bool {
        self.versions.is_empty()
    }

    /// The versions tracked, oldest first.
    pub fn versions(&self) -> impl Iterator<Item = u64> + '_ {
        self.versions.iter().map(|(v, _)| *v)
    }

    /// Both tokens' revisions in one (a push merged into another, or a push sent before
    /// the last one was answered).
    pub fn merge(mut self, mut other: Revisions) -> Revisions {
        if self.ledger.is_none() {
            self.ledger = other.ledger.take();
        }
        let theirs = std::mem::take(&mut other.versions);
        if theirs.is_empty() {
            return self;
        }
        self.versions.extend(theirs);
        self.versions.sort_unstable();
        // A version in both: one entry, sent if either was.
        self.versions.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                earlier.1 |= later.1;
            }
            same
        });
        let cap = self.ledger.as_ref().map_or(usize::MAX, |l| l.capacity());
        if self.versions.len() > cap {
            let excess = self.versions.len() - cap;
            // Older than anything the ledger keeps: nothing to settle there.
            self.versions.drain(..excess);
        }
        self
    }

    /// The proxy was sent a config at or after every tracked version.
    pub fn sent(&mut self) {
        let Some(ledger) = &self.ledger else { return };
        let unsent = self
            .versions
            .iter()
            .filter(|(_, sent)| !sent)
            .map(|(v, _)| *v);
        ledger.sent(unsent);
        for (_, sent) in &mut self.versions {
            *sent = true;
        }
    }

    /// `proxy` ACKed a config at or after every tracked version.
    pub fn acked(mut self, proxy: &str) {
        self.sent();
        if let Some(ledger) = self.ledger.take() {
            ledger.acked(self.versions(), proxy);
        }
    }

    /// The proxy NACKed the config carrying them.
    pub fn nacked(mut self, sample: &NackSample) {
        self.sent();
        if let Some(ledger) = self.ledger.take() {
            ledger.nacked(self.versions(), sample);
        }
    }
}

impl Drop for Revisions {
    fn drop(&mut self) {
        if let Some(ledger) = self.ledger.take()
            && !self.versions.is_empty()
        {
            ledger.gone(self.versions());
        }
    }
}
