//! The edge's ledger of recent revisions and their counts.

use serde::{Deserialize, Serialize};
use shoal_proto::change::ChangeSet;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::SystemTime;

/// NACK samples kept per revision: enough to name the proxies and the reason, bounded
/// however many proxies reject it.
pub const MAX_NACK_SAMPLES: usize = 10;

/// Changed keys named per revision (the rest are counted).
const MAX_KEYS_SHOWN: usize = 10;

/// The latest revisions this edge pushed, at most `capacity` of them.
#[derive(Debug)]
pub struct Ledger {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    revisions: BTreeMap<u64, RevisionCounts>,
    /// The newest version dropped to stay within capacity: what is at or below it may
    /// have been pushed and forgotten.
    forgotten_through: u64,
    /// The `converge` span of each revision still pending, while traces are exported:
    /// ended (with the counts) when its last concerned proxy answers or leaves, or when
    /// the revision is forgotten. At most one per kept revision.
    converging: BTreeMap<u64, tracing::Span>,
}

/// Records `counts` on `span` (its fields `sent`, `acked`, `nacked`, `gone`, `pending`).
fn record(span: &tracing::Span, counts: &RevisionCounts) {
    span.record("sent", counts.sent);
    span.record("acked", counts.acked);
    span.record("nacked", counts.nacked);
    span.record("gone", counts.gone);
    span.record("pending", counts.pending);
}

/// One revision's counts on this edge.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RevisionCounts {
    /// The snapshot version pushed (the config revision it reflects).
    pub version: u64,
    /// When this edge dispatched it, in Unix milliseconds.
    pub dispatched_unix_ms: u64,
    /// When the earliest change it carries happened, in Unix milliseconds.
    pub changed_unix_ms: u64,
    /// A full push (else endpoints only).
    pub full: bool,
    /// What changed (the first few; empty: everything).
    pub changes: Vec<String>,
    /// How many keys changed in all (0: everything).
    pub changed: usize,
    /// Proxies it concerned here.
    pub concerned: u64,
    /// Sent a config at or after it (or found to need nothing new).
    pub sent: u64,
    pub acked: u64,
    pub nacked: u64,
    /// Left (disconnected, handed off) before answering.
    pub gone: u64,
    /// Concerned proxies that have not answered yet (nor left).
    pub pending: u64,
    /// A few of the rejections.
    pub nacks: Vec<NackSample>,
}

impl RevisionCounts {
    fn recount(&mut self) {
        self.pending = self
            .concerned
            .saturating_sub(self.acked + self.nacked + self.gone);
    }
}

/// One proxy's rejection of a revision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NackSample {
    pub proxy: String,
    pub type_url: String,
    /// Envoy's `error_detail` message (bounded, as the stream keeps it).
    pub message: String,
}

/// Where a revision stands on this edge.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RevisionState {
    /// Pushed: its counts.
    Pushed(RevisionCounts),
    /// This edge holds it (or newer) but pushed nothing at or after it: every proxy here
    /// connected after it, or none was concerned.
    Current,
    /// This edge does not hold it yet.
    NotYet,
    /// Older than the revisions this edge keeps (`--push-status-revisions`).
    Forgotten,
}

/// The answer to `/debug/push_status`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PushStatus {
    /// The revision asked about (`None`: the latest pushed).
    pub asked: Option<u64>,
    /// The snapshot version this edge holds.
    pub held: u64,
    /// The newest version this edge pushed.
    pub latest_pushed: Option<u64>,
    #[serde(flatten)]
    pub state: RevisionState,
}

impl Ledger {
    pub fn new(capacity: usize) -> Self {
        Ledger {
            capacity: capacity.max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// How many revisions it keeps.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens the entry of `version` (carrying `changes`), dispatched at `at`; a version
    /// dispatched again (the JWKS a generator reads changed) keeps its entry.
    pub fn dispatched(&self, version: u64, changes: &ChangeSet, at: SystemTime) {
        let mut inner = self.lock();
        if version <= inner.forgotten_through {
            return;
        }
        inner
            .revisions
            .entry(version)
            .or_insert_with(|| RevisionCounts {
                version,
                dispatched_unix_ms: unix_ms(at),
                changed_unix_ms: changes.start_unix_nanos / 1_000_000,
                full: changes.full,
                changes: changes
                    .keys
                    .iter()
                    .take(MAX_KEYS_SHOWN)
                    .map(|k| k.to_string())
                    .collect(),
                changed: changes.keys.len(),
                ..Default::default()
            });
        let mut ended = Vec::new();
        while inner.revisions.len() > self.capacity {
            if let Some((oldest, counts)) = inner.revisions.pop_first() {
                inner.forgotten_through = inner.forgotten_through.max(oldest);
                if let Some(span) = inner.converging.remove(&oldest) {
                    record(&span, &counts);
                    ended.push(span);
                }
            }
        }
        drop(inner);
        // Spans end (and are exported) outside the lock.
        drop(ended);
    }

    /// Holds `span` until every proxy `version` concerned answered or left (at once if
    /// none is pending), then records the counts on it and ends it: the end of the
    /// change's trace on this edge. Call after [`concerned`](Self::concerned).
    pub fn converging(&self, version: u64, span: tracing::Span) {
        let mut inner = self.lock();
        let Some(counts) = inner.revisions.get(&version) else {
            return;
        };
        if counts.pending == 0 {
            record(&span, counts);
            drop(inner);
            return;
        }
        let replaced = inner.converging.insert(version, span);
        drop(inner);
        drop(replaced);
    }

    /// How many `converge` spans are held (tests).
    #[cfg(test)]
    pub(crate) fn spans_held(&self) -> usize {
        self.lock().converging.len()
    }

    /// `n` more proxies were queued `version`.
    pub fn concerned(&self, version: u64, n: u64) {
        self.each(std::iter::once(version), None, |e| e.concerned += n);
    }

    /// Applies `f` to the entry of each of `versions` this ledger still keeps; `answered`
    /// is the proxy whose answer this is, named on a `converge` span it ends (the slowest
    /// of those that answered).
    fn each(
        &self,
        versions: impl Iterator<Item = u64>,
        answered: Option<&str>,
        mut f: impl FnMut(&mut RevisionCounts),
    ) {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let mut ended = Vec::new();
        for v in versions {
            if let Some(entry) = inner.revisions.get_mut(&v) {
                f(entry);
                entry.recount();
                if entry.pending == 0
                    && let Some(span) = inner.converging.remove(&v)
                {
                    record(&span, entry);
                    if let Some(proxy) = answered {
                        span.record("slowest_proxy", proxy);
                    }
                    ended.push(span);
                }
            }
        }
        drop(guard);
        // Spans end (and are exported) outside the lock.
        drop(ended);
    }

    pub(crate) fn sent(&self, versions: impl Iterator<Item = u64>) {
        self.each(versions, None, |e| e.sent += 1);
    }

    pub(crate) fn acked(&self, versions: impl Iterator<Item = u64>, proxy: &str) {
        self.each(versions, Some(proxy), |e| e.acked += 1);
    }

    pub(crate) fn nacked(&self, versions: impl Iterator<Item = u64>, sample: &NackSample) {
        self.each(versions, Some(&sample.proxy), |e| {
            e.nacked += 1;
            if e.nacks.len() < MAX_NACK_SAMPLES {
                e.nacks.push(sample.clone());
            }
        });
    }

    pub(crate) fn gone(&self, versions: impl Iterator<Item = u64>) {
        self.each(versions, None, |e| e.gone += 1);
    }

    /// Where `asked` (the latest pushed when `None`) stands, this edge holding `held`.
    pub fn status(&self, asked: Option<u64>, held: u64) -> PushStatus {
        let inner = self.lock();
        let latest_pushed = inner.revisions.keys().next_back().copied();
        let state = match asked {
            None => match inner.revisions.values().next_back() {
                Some(counts) => RevisionState::Pushed(counts.clone()),
                None => RevisionState::Current,
            },
            Some(r) if r <= inner.forgotten_through => RevisionState::Forgotten,
            Some(r) => match inner.revisions.range(r..).next() {
                Some((_, counts)) => RevisionState::Pushed(counts.clone()),
                None if held >= r => RevisionState::Current,
                None => RevisionState::NotYet,
            },
        };
        PushStatus {
            asked,
            held,
            latest_pushed,
            state,
        }
    }
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
