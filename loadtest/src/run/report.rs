//! What a run measured: printed as a table, written as JSON.

use super::change::ChangeKind;
use super::procfs::ProcSample;
use crate::client::CacheReport;
use serde::Serialize;
use std::fmt;

/// Convergence times in milliseconds (nearest rank).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub count: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    /// `None` for no samples.
    pub fn of(mut ms: Vec<f64>) -> Option<Percentiles> {
        if ms.is_empty() {
            return None;
        }
        ms.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            let i = ((p / 100.0) * ms.len() as f64).ceil() as usize;
            round(ms[i.clamp(1, ms.len()) - 1])
        };
        Some(Percentiles {
            count: ms.len(),
            p50: rank(50.0),
            p90: rank(90.0),
            p99: rank(99.0),
            max: round(ms[ms.len() - 1]),
        })
    }
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The change that was made.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChangeReport {
    pub kind: ChangeKind,
    pub service: String,
    pub file: String,
    pub value: String,
}

/// A watched process (an edge, or the loadtest itself).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcReport {
    pub pid: String,
    /// `VmHWM` at the end of the run.
    pub peak_rss_kib: u64,
    /// `VmRSS` at the end of the run.
    pub rss_kib: u64,
    /// `VmRSS` before the proxies connected.
    pub rss_kib_before: u64,
    /// `VmRSS` once every proxy had its initial config (or the sync wait ended).
    pub rss_kib_at_sync: u64,
    /// CPU seconds since the process started.
    pub cpu_s: f64,
    /// CPU seconds during this run.
    pub cpu_s_run: f64,
    /// CPU seconds from the first connection to the end of the initial sync.
    pub cpu_s_sync: f64,
    /// CPU seconds from the end of the initial sync to the end of the run (the changes,
    /// settle and hold): over `Report::after_sync_s`, the CPUs used under the changes.
    pub cpu_s_after_sync: f64,
}

impl ProcReport {
    pub fn new(pid: String, before: ProcSample, at_sync: ProcSample, after: ProcSample) -> Self {
        ProcReport {
            pid,
            peak_rss_kib: after.peak_rss_kib,
            rss_kib: after.rss_kib,
            rss_kib_before: before.rss_kib,
            rss_kib_at_sync: at_sync.rss_kib,
            cpu_s: round2(after.cpu_s),
            cpu_s_run: round2(after.cpu_s - before.cpu_s),
            cpu_s_sync: round2(at_sync.cpu_s - before.cpu_s),
            cpu_s_after_sync: round2(after.cpu_s - at_sync.cpu_s),
        }
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// One side's cost per proxy: the edges together, or the loadtest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Cost {
    /// CPU milliseconds per proxy during the initial sync, and during the whole run.
    pub cpu_ms_sync: f64,
    pub cpu_ms_run: f64,
    /// KiB per proxy: RSS grown from before the proxies connected to the end of the
    /// sync, and the peak RSS (everything the processes hold) over the proxies.
    pub rss_kib_sync: f64,
    pub peak_rss_kib: f64,
}

impl Cost {
    /// The cost of `procs` together over `proxies`.
    pub fn of<'a>(procs: impl IntoIterator<Item = &'a ProcReport>, proxies: usize) -> Cost {
        let n = proxies.max(1) as f64;
        let mut c = Cost::default();
        for p in procs {
            c.cpu_ms_sync += p.cpu_s_sync * 1000.0;
            c.cpu_ms_run += p.cpu_s_run * 1000.0;
            c.rss_kib_sync += p.rss_kib_at_sync.saturating_sub(p.rss_kib_before) as f64;
            c.peak_rss_kib += p.peak_rss_kib as f64;
        }
        Cost {
            cpu_ms_sync: round3(c.cpu_ms_sync / n),
            cpu_ms_run: round3(c.cpu_ms_run / n),
            rss_kib_sync: round2(c.rss_kib_sync / n),
            peak_rss_kib: round2(c.peak_rss_kib / n),
        }
    }
}

/// Per proxy, what the edges and the loadtest cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PerProxy {
    /// Every `--edge-pid` together (absent pids count nothing).
    pub edges: Cost,
    pub loadtest: Cost,
}

/// Proxies whose served stream ended (an edge killed, drained, handing off) and that
/// were served again on another stream.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Resync {
    /// Served streams that ended, and those whose proxy was served again.
    pub streams_lost: u64,
    pub served_again: u64,
    /// From the first such end to the last proxy served again (to hold against the
    /// edges' drain grace).
    pub window_ms: Option<f64>,
    /// From the first such end to the last: the part of the window the ends themselves
    /// took (a drain spreads them over its window); the rest is the tail of serving the
    /// last of them again.
    pub ended_over_ms: Option<f64>,
    /// Per proxy, from its stream's end to its next first response.
    pub gap_ms: Option<Percentiles>,
    /// The bound asked for (`--resync-within`): a longer window, or a proxy left
    /// unserved, fails the run.
    pub within_ms: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub proxies: usize,
    /// Streams open when the sync wait ended.
    pub connected: usize,
    /// Proxies with their initial config when the sync wait ended.
    pub synced: usize,
    /// Proxies that never had their initial config, at the end of the run: a failure
    /// (a proxy left without config), whatever else the run measured.
    pub never_synced: usize,
    /// Streams an edge ended to hand their proxy to another edge (ring change, drain).
    pub handed_off: u64,
    pub conns: usize,
    pub protocol: &'static str,
    pub xds_addrs: Vec<String>,
    /// From the start of connecting until the last proxy had its initial config; `null`
    /// when not every proxy got there within the timeout.
    pub initial_sync_s: Option<f64>,
    /// Wall seconds from the end of the initial sync to the end of the run.
    pub after_sync_s: f64,
    pub change: Option<ChangeReport>,
    /// Proxies whose scope includes the change (at the end of the run).
    pub proxies_expected: usize,
    /// Proxies that ACKed a response carrying the change.
    pub proxies_pushed: usize,
    /// Of those, proxies that were not expected to get it.
    pub proxies_pushed_unexpected: usize,
    pub proxies_not_pushed: usize,
    /// From the file's rename to each proxy's ACK of the change.
    pub convergence_ms: Option<Percentiles>,
    /// Per proxy, from opening its stream to its first response (admission and first
    /// generation under a connection storm).
    pub time_to_first_response_ms: Option<Percentiles>,
    /// Responses after the write, and those to proxies whose scope does not include it.
    pub pushes: u64,
    pub pushes_unneeded: u64,
    pub push_bytes: u64,
    pub responses: u64,
    pub bytes_received: u64,
    pub nacks: u64,
    pub errors: u64,
    pub reconnects: u64,
    /// Responses whose snapshot version was older than one the proxy already had.
    pub version_regressions: u64,
    /// Streams open, and proxies that hold the change (ACKed it on some stream), at the
    /// end of the run.
    pub final_connected: usize,
    pub final_converged: usize,
    /// Proxies whose stream failed twice.
    pub gave_up: usize,
    /// Some wait (sync or convergence) ended at the timeout.
    pub timed_out: bool,
    pub edges: Vec<ProcReport>,
    pub loadtest: ProcReport,
    /// CPU and memory per proxy, of the edges and of the loadtest.
    pub per_proxy: PerProxy,
    /// Responses decoded and verified once, and copies recognised.
    pub verify_cache: CacheReport,
    pub resync: Resync,
    /// The first errors and NACKs, for diagnosis.
    pub error_samples: Vec<String>,
}

impl Report {
    /// Why the run failed, if it did: proxies that never synced or gave up, or a wait
    /// that ended at the timeout. Empty for a run that passed.
    pub fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        if self.never_synced > 0 {
            failures.push(format!(
                "{} of {} proxies never synced (never had their initial config)",
                self.never_synced, self.proxies
            ));
        }
        if self.gave_up > 0 {
            failures.push(format!("{} proxies gave up reconnecting", self.gave_up));
        }
        if self.timed_out {
            failures.push("a wait (sync, convergence or reconnect) ended at --timeout".into());
        }

        let r = &self.resync;
        if let Some(within) = r.within_ms {
            if r.served_again < r.streams_lost {
                failures.push(format!(
                    "{} of {} proxies whose stream ended were not served again",
                    r.streams_lost - r.served_again,
                    r.streams_lost
                ));
            }
            if r.window_ms.is_some_and(|w| w > within) {
                failures.push(format!(
                    "proxies were served again within {} ms, not {within} ms",
                    r.window_ms.unwrap_or_default()
                ));
            }
        }
        failures
    }

    /// The run on one line, for scripts and logs.
    pub fn summary(&self) -> String {
        let p = |p: &Option<Percentiles>, f: fn(&Percentiles) -> f64| {
            p.as_ref().map_or("-".to_string(), |p| format!("{}", f(p)))
        };
        let (e, l) = (&self.per_proxy.edges, &self.per_proxy.loadtest);
        let mut line = format!(
            "synced {}/{} initial_sync_s {} change_p50_ms {} change_p99_ms {} \
             first_response_p99_ms {} nacks {} version_regressions {} \
             edge_cpu_ms_per_proxy {} edge_rss_kib_per_proxy {} \
             loadtest_cpu_ms_per_proxy {} loadtest_peak_rss_kib_per_proxy {}",
            self.synced,
            self.proxies,
            self.initial_sync_s.map_or("-".into(), |s| s.to_string()),
            p(&self.convergence_ms, |p| p.p50),
            p(&self.convergence_ms, |p| p.p99),
            p(&self.time_to_first_response_ms, |p| p.p99),
            self.nacks,
            self.version_regressions,
            e.cpu_ms_sync,
            e.rss_kib_sync,
            l.cpu_ms_sync,
            l.peak_rss_kib,
        );
        let r = &self.resync;
        if r.streams_lost > 0 {
            line += &format!(
                " served_again {}/{} resync_window_ms {} resync_ended_over_ms {}",
                r.served_again,
                r.streams_lost,
                r.window_ms.map_or("-".into(), |w| w.to_string()),
                r.ended_over_ms.map_or("-".into(), |w| w.to_string())
            );
        }
        line
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let row = |f: &mut fmt::Formatter<'_>, k: &str, v: String| writeln!(f, "  {k:<18} {v}");
        writeln!(f, "loadtest: {} proxies ({})", self.proxies, self.protocol)?;
        row(
            f,
            "connections",
            format!("{} to {}", self.conns, self.xds_addrs.join(", ")),
        )?;
        row(
            f,
            "connected / synced",
            format!("{} / {}", self.connected, self.synced),
        )?;
        row(
            f,
            "never synced",
            format!(
                "{} ({} streams handed off to another edge)",
                self.never_synced, self.handed_off
            ),
        )?;
        row(
            f,
            "initial sync",
            match self.initial_sync_s {
                Some(s) => format!("{s:.2} s"),
                None => "not complete (timed out)".into(),
            },
        )?;
        row(
            f,
            "first response",
            match &self.time_to_first_response_ms {
                Some(p) => format!("p50 {} ms  p99 {} ms  max {} ms", p.p50, p.p99, p.max),
                None => "no proxy got a response".into(),
            },
        )?;
        if let Some(c) = &self.change {
            row(
                f,
                "change",
                format!("{:?} {} → {} ({})", c.kind, c.service, c.value, c.file).to_lowercase(),
            )?;
            row(
                f,
                "proxies pushed",
                format!(
                    "{} of {} expected ({} unexpected; {} not pushed)",
                    self.proxies_pushed,
                    self.proxies_expected,
                    self.proxies_pushed_unexpected,
                    self.proxies_not_pushed
                ),
            )?;
            row(
                f,
                "convergence",
                match &self.convergence_ms {
                    Some(p) => format!(
                        "p50 {} ms  p90 {} ms  p99 {} ms  max {} ms",
                        p.p50, p.p90, p.p99, p.max
                    ),
                    None => "no proxy converged".into(),
                },
            )?;
            row(
                f,
                "pushes",
                format!(
                    "{} ({} to proxies that did not need it), {:.1} KiB",
                    self.pushes,
                    self.pushes_unneeded,
                    self.push_bytes as f64 / 1024.0
                ),
            )?;
        }
        row(
            f,
            "received",
            format!(
                "{:.1} MiB in {} responses",
                self.bytes_received as f64 / (1024.0 * 1024.0),
                self.responses
            ),
        )?;
        row(
            f,
            "nacks / errors",
            format!(
                "{} / {} ({} reconnects, {} gave up)",
                self.nacks, self.errors, self.reconnects, self.gave_up
            ),
        )?;
        row(
            f,
            "at the end",
            format!(
                "{} connected, {} hold the change, {} version regressions",
                self.final_connected, self.final_converged, self.version_regressions
            ),
        )?;
        for p in self.edges.iter().chain([&self.loadtest]) {
            let name = if p.pid == "self" {
                "loadtest".to_string()
            } else {
                format!("edge {}", p.pid)
            };
            row(
                f,
                &name,
                format!(
                    "peak RSS {}, RSS {} ({} at sync), CPU {:.2} s ({:.2} s this run, \
                     {:.2} s in the {:.1} s after the sync)",
                    mib(p.peak_rss_kib),
                    mib(p.rss_kib),
                    mib(p.rss_kib_at_sync),
                    p.cpu_s,
                    p.cpu_s_run,
                    p.cpu_s_after_sync,
                    self.after_sync_s
                ),
            )?;
        }
        let cost = |c: &Cost| {
            format!(
                "CPU {:.3} ms at sync ({:.3} ms in the run), RSS {:.1} KiB grown at sync, \
                 {:.1} KiB peak",
                c.cpu_ms_sync, c.cpu_ms_run, c.rss_kib_sync, c.peak_rss_kib
            )
        };
        if !self.edges.is_empty() {
            row(f, "edges per proxy", cost(&self.per_proxy.edges))?;
        }
        row(f, "loadtest / proxy", cost(&self.per_proxy.loadtest))?;
        let v = &self.verify_cache;
        row(
            f,
            "verified",
            format!(
                "{} responses decoded ({:.1} MiB), {} copies recognised ({:.1} MiB); \
                 cache {} of {}, {} evicted",
                v.misses,
                v.bytes_verified as f64 / (1024.0 * 1024.0),
                v.hits,
                v.bytes_skipped as f64 / (1024.0 * 1024.0),
                v.entries,
                v.capacity,
                v.evictions
            ),
        )?;
        let r = &self.resync;
        if r.streams_lost > 0 {
            row(
                f,
                "served again",
                format!(
                    "{} of {} proxies whose stream ended (over {} ms), within {} ms; gap {}",
                    r.served_again,
                    r.streams_lost,
                    r.ended_over_ms.map_or("-".into(), |w| w.to_string()),
                    r.window_ms.map_or("-".into(), |w| w.to_string()),
                    match &r.gap_ms {
                        Some(p) => format!("p50 {} ms  p99 {} ms  max {} ms", p.p50, p.p99, p.max),
                        None => "-".into(),
                    }
                ),
            )?;
        }
        for e in &self.error_samples {
            row(f, "error", e.clone())?;
        }
        if self.timed_out {
            writeln!(f, "  (a wait ended at --timeout)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let p = Percentiles::of((1..=100).map(f64::from).collect()).unwrap();
        assert_eq!(
            (p.p50, p.p90, p.p99, p.max, p.count),
            (50.0, 90.0, 99.0, 100.0, 100)
        );
        let one = Percentiles::of(vec![7.25]).unwrap();
        assert_eq!((one.p50, one.p99), (7.3, 7.3));
        assert!(Percentiles::of(Vec::new()).is_none());
    }
}
