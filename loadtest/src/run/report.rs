//! What a run measured: printed as a table, written as JSON.

use super::change::ChangeKind;
use super::procfs::ProcSample;
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
    /// `VmRSS` once every proxy had its initial config (or the sync wait ended).
    pub rss_kib_at_sync: u64,
    /// CPU seconds since the process started.
    pub cpu_s: f64,
    /// CPU seconds during this run.
    pub cpu_s_run: f64,
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
            rss_kib_at_sync: at_sync.rss_kib,
            cpu_s: round2(after.cpu_s),
            cpu_s_run: round2(after.cpu_s - before.cpu_s),
            cpu_s_after_sync: round2(after.cpu_s - at_sync.cpu_s),
        }
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
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
        failures
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
