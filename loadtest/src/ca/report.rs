//! What `loadtest ca` reports: issuance latency percentiles, throughput, errors.

use super::{CaConfig, Outcome};
use crate::run::Percentiles;
use crate::run::procfs::ProcSample;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Error messages kept as samples (the count is complete).
const MAX_SAMPLES: usize = 10;

#[derive(Clone, Debug, Serialize)]
pub struct CaReport {
    pub callers: usize,
    pub conns: usize,
    pub addr: String,
    pub tls: bool,
    pub tokens: bool,
    /// Certificates issued (a chain naming the caller came back).
    pub issued: usize,
    pub errors: usize,
    /// Errors by their first words (gRPC code, or what failed).
    pub errors_by_kind: BTreeMap<String, usize>,
    /// Per call: from sending the request to the response, of the issued ones.
    pub latency_ms: Option<Percentiles>,
    /// From the common start to the last answer.
    pub wall_s: f64,
    /// Issued per second over `wall_s`.
    pub per_second: f64,
    /// Per edge: CPU seconds during the burst, RSS after it.
    pub edges: Vec<CaEdge>,
    pub error_samples: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CaEdge {
    pub pid: String,
    pub cpu_s: f64,
    pub rss_kib: u64,
    pub peak_rss_kib: u64,
}

impl CaReport {
    pub(super) fn new(
        config: &CaConfig,
        conns: usize,
        outcomes: Vec<Outcome>,
        wall: Duration,
        pids: &[String],
        before: &[ProcSample],
        after: &[ProcSample],
    ) -> Self {
        let mut ms = Vec::with_capacity(outcomes.len());
        let mut errors_by_kind = BTreeMap::new();
        let mut error_samples = Vec::new();
        for outcome in outcomes {
            match outcome {
                Ok(latency) => ms.push(latency.as_secs_f64() * 1000.0),
                Err(e) => {
                    let kind = e.split(':').next().unwrap_or_default().to_string();
                    *errors_by_kind.entry(kind).or_insert(0) += 1;
                    if error_samples.len() < MAX_SAMPLES {
                        error_samples.push(e);
                    }
                }
            }
        }
        let issued = ms.len();
        let wall_s = wall.as_secs_f64();
        CaReport {
            callers: config.callers,
            conns,
            addr: config.addr.clone(),
            tls: config.security.dial.is_tls(),
            tokens: config.security.tokens.is_some(),
            issued,
            errors: errors_by_kind.values().sum(),
            errors_by_kind,
            latency_ms: Percentiles::of(ms),
            wall_s: (wall_s * 1000.0).round() / 1000.0,
            per_second: (issued as f64 / wall_s.max(1e-9)).round(),
            edges: pids
                .iter()
                .zip(before.iter().zip(after))
                .map(|(pid, (b, a))| CaEdge {
                    pid: pid.clone(),
                    cpu_s: ((a.cpu_s - b.cpu_s) * 100.0).round() / 100.0,
                    rss_kib: a.rss_kib,
                    peak_rss_kib: a.peak_rss_kib,
                })
                .collect(),
            error_samples,
        }
    }
}

impl std::fmt::Display for CaReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = match (self.tls, self.tokens) {
            (true, true) => "TLS + JWT",
            (true, false) => "TLS, no token",
            (false, true) => "plaintext + JWT",
            (false, false) => "plaintext, no token",
        };
        writeln!(
            f,
            "CreateCertificate: {} callers over {} connections to {} ({mode})",
            self.callers, self.conns, self.addr
        )?;
        writeln!(
            f,
            "  issued {} errors {} in {:.3} s ({} /s)",
            self.issued, self.errors, self.wall_s, self.per_second
        )?;
        if let Some(p) = &self.latency_ms {
            writeln!(
                f,
                "  latency ms: p50 {} p90 {} p99 {} max {}",
                p.p50, p.p90, p.p99, p.max
            )?;
        }
        for e in &self.edges {
            writeln!(
                f,
                "  edge {}: {} CPU-s, RSS {} KiB (peak {} KiB)",
                e.pid, e.cpu_s, e.rss_kib, e.peak_rss_kib
            )?;
        }
        for (kind, count) in &self.errors_by_kind {
            writeln!(f, "  error {kind}: {count}")?;
        }
        for s in &self.error_samples {
            writeln!(f, "  e.g. {s}")?;
        }
        Ok(())
    }
}
