//! Counters every proxy task updates and the run reads. Times are nanoseconds since the
//! run started.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Error messages kept for the report.
const SAMPLES: usize = 8;

#[derive(Debug, Default)]
pub struct Stats {
    /// Streams open now.
    pub connected: AtomicUsize,
    /// Proxies that have had their initial config.
    pub synced: AtomicUsize,
    /// Proxies that stopped for good (their stream failed twice).
    pub gave_up: AtomicUsize,
    pub responses: AtomicU64,
    pub bytes_received: AtomicU64,
    pub nacks: AtomicU64,
    pub errors: AtomicU64,
    pub reconnects: AtomicU64,
    /// Streams the edge ended to hand the proxy to another edge.
    pub handed_off: AtomicU64,
    /// Responses carrying a snapshot version older than one the proxy already had.
    pub version_regressions: AtomicU64,
    /// Set just before the change is written: later responses are pushes.
    pub changed: AtomicBool,
    pub pushes: AtomicU64,
    pub push_bytes: AtomicU64,
    /// Pushes to proxies that should not receive the change.
    pub pushes_unneeded: AtomicU64,
    /// Proxies whose scope includes the change, now.
    pub expected: AtomicI64,
    /// Proxies that ACKed the change, and those of them that were expected to.
    pub converged: AtomicUsize,
    pub converged_expected: AtomicUsize,
    /// When the last proxy synced.
    pub last_sync_ns: AtomicU64,
    /// Streams that had served and then ended (an edge died, drained or handed the
    /// proxy off), and proxies served again on a later stream after such an end.
    pub streams_lost: AtomicU64,
    pub served_again: AtomicU64,
    /// When the first served stream ended, and when the last proxy was served again
    /// (0 until then): the window every proxy took to be served again.
    pub first_loss_ns: AtomicU64,
    pub last_served_again_ns: AtomicU64,
    /// When the last served stream ended: from the first, how long the ends took (a
    /// drain spreads them over its window), which the window's tail is measured after.
    pub last_loss_ns: AtomicU64,
    /// Per proxy served again, from its stream's end to the next stream's first response.
    served_again_after: Mutex<Vec<u64>>,
    converged_at: Mutex<Vec<u64>>,
    /// Per proxy, from its first stream's open to its first response.
    first_response: Mutex<Vec<u64>>,
    samples: Mutex<Vec<String>>,
}

impl Stats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    pub fn synced(&self, at_ns: u64) {
        self.synced.fetch_add(1, Relaxed);
        self.last_sync_ns.fetch_max(at_ns, Relaxed);
    }

    pub fn converged(&self, at_ns: u64, expected: bool) {
        self.converged_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(at_ns);
        if expected {
            self.converged_expected.fetch_add(1, Relaxed);
        }
        self.converged.fetch_add(1, Relaxed);
    }

    /// A stream that had served ended at `at_ns`.
    pub fn lost(&self, at_ns: u64) {
        self.streams_lost.fetch_add(1, Relaxed);
        // 0 is "none yet".
        let at_ns = at_ns.max(1);
        let _ = self.first_loss_ns.fetch_update(Relaxed, Relaxed, |first| {
            (first == 0 || at_ns < first).then_some(at_ns)
        });
        self.last_loss_ns.fetch_max(at_ns, Relaxed);
    }

    /// A proxy whose served stream ended at `lost_ns` got a response again at `at_ns`.
    pub fn served_again(&self, lost_ns: u64, at_ns: u64) {
        self.served_again.fetch_add(1, Relaxed);
        self.last_served_again_ns.fetch_max(at_ns, Relaxed);
        self.served_again_after
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(at_ns.saturating_sub(lost_ns));
    }

    pub fn served_again_after(&self) -> Vec<u64> {
        self.served_again_after
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A proxy's first response came `after_ns` after it opened its first stream.
    pub fn first_response(&self, after_ns: u64) {
        self.first_response
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(after_ns);
    }

    pub fn first_responses(&self) -> Vec<u64> {
        self.first_response
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Keeps the first few error messages.
    pub fn sample(&self, what: impl FnOnce() -> String) {
        let mut s = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if s.len() < SAMPLES {
            s.push(what());
        }
    }

    pub fn error(&self, what: impl FnOnce() -> String) {
        self.errors.fetch_add(1, Relaxed);
        self.sample(what);
    }

    pub fn converged_at(&self) -> Vec<u64> {
        self.converged_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn samples(&self) -> Vec<String> {
        self.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Relaxed)
    }
}

/// Counts a proxy in a gauge while held.
#[derive(Debug)]
pub(crate) struct Gauge<'a> {
    gauge: &'a AtomicI64,
    on: bool,
}

impl<'a> Gauge<'a> {
    pub fn new(gauge: &'a AtomicI64) -> Self {
        Gauge { gauge, on: false }
    }

    pub fn set(&mut self, on: bool) {
        if on != self.on {
            self.gauge.fetch_add(if on { 1 } else { -1 }, Relaxed);
            self.on = on;
        }
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.set(false);
    }
}

/// Counts an open stream while held.
#[derive(Debug)]
pub(crate) struct Connected<'a>(&'a AtomicUsize);

impl<'a> Connected<'a> {
    pub fn new(c: &'a AtomicUsize) -> Self {
        c.fetch_add(1, Relaxed);
        Connected(c)
    }
}

impl Drop for Connected<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}
