//! The fleet's view of one revision, from each edge's `/debug/push_status`: summed,
//! judged, and printed (no I/O here).

use serde::Serialize;
use shoal_edge::convergence::{PushStatus, RevisionCounts, RevisionState};
use std::fmt::Write as _;

/// NACK samples shown in all (each edge keeps a few per revision).
const MAX_NACKS_SHOWN: usize = 10;

/// What one edge answered.
#[derive(Clone, Debug, Serialize)]
pub struct EdgeAnswer {
    /// The address asked.
    pub addr: String,
    /// The edge's ID, when it answered.
    pub edge: Option<String>,
    #[serde(flatten)]
    pub outcome: Outcome,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Answered(PushStatus),
    /// Unreachable, or an answer that is not a push status.
    Failed(String),
}

/// How the revision stands across the fleet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every proxy it concerned ACKed it (or left).
    Converged,
    /// A proxy rejected it.
    Nacked,
    /// Proxies (or edges that do not hold it yet) still to answer.
    Pending,
    /// An edge did not answer, or has forgotten the revision.
    Unknown,
}

impl Verdict {
    /// `shoal status`'s exit status.
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Converged => 0,
            Verdict::Nacked => 1,
            Verdict::Pending => 2,
            Verdict::Unknown => 3,
        }
    }
}

/// One revision across the fleet.
#[derive(Clone, Debug, Serialize)]
pub struct FleetStatus {
    pub revision: Option<u64>,
    pub verdict: Verdict,
    /// Summed over the edges that pushed it.
    pub totals: RevisionCounts,
    pub edges: Vec<EdgeAnswer>,
}

impl FleetStatus {
    pub fn new(revision: Option<u64>, edges: Vec<EdgeAnswer>) -> Self {
        let mut totals = RevisionCounts {
            version: revision.unwrap_or_default(),
            ..Default::default()
        };
        let (mut pending, mut unknown) = (false, edges.is_empty());
        for answer in &edges {
            match &answer.outcome {
                Outcome::Answered(status) => match &status.state {
                    RevisionState::Pushed(c) => {
                        add(&mut totals, c);
                        pending |= c.pending > 0;
                    }
                    RevisionState::Current => {}
                    RevisionState::NotYet => pending = true,
                    RevisionState::Forgotten => unknown = true,
                },
                Outcome::Failed(_) => unknown = true,
            }
        }
        let verdict = if totals.nacked > 0 {
            Verdict::Nacked
        } else if unknown {
            Verdict::Unknown
        } else if pending {
            Verdict::Pending
        } else {
            Verdict::Converged
        };
        FleetStatus {
            revision,
            verdict,
            totals,
            edges,
        }
    }

    /// The table: one row per edge, the totals, the NACKs and the verdict.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let revision = self
            .revision
            .map_or("none pushed yet".to_string(), |r| r.to_string());
        let _ = write!(out, "revision {revision}");
        let t = &self.totals;
        match t.changed {
            0 if t.concerned > 0 => {
                let _ = write!(out, ": everything");
            }
            0 => {}
            n => {
                let _ = write!(out, ": {}", t.changes.join(", "));
                if n > t.changes.len() {
                    let _ = write!(out, " and {} more", n - t.changes.len());
                }
            }
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:<24} {:<10} {:>10} {:>10} {:>10} {:>7} {:>7} {:>8}",
            "EDGE", "STATE", "CONCERNED", "SENT", "ACKED", "NACKED", "GONE", "PENDING"
        );
        for answer in &self.edges {
            let name = answer.edge.as_deref().unwrap_or(&answer.addr);
            match &answer.outcome {
                Outcome::Answered(status) => match &status.state {
                    RevisionState::Pushed(c) => {
                        let _ = writeln!(out, "{}", row(name, "pushed", c));
                    }
                    RevisionState::Current => {
                        let _ = writeln!(
                            out,
                            "{name:<24} current    (holds {}; no proxy here waits on it)",
                            status.held
                        );
                    }
                    RevisionState::NotYet => {
                        let _ = writeln!(out, "{name:<24} not-yet    (holds {})", status.held);
                    }
                    RevisionState::Forgotten => {
                        let _ = writeln!(
                            out,
                            "{name:<24} forgotten  (older than the revisions it keeps: --push-status-revisions)"
                        );
                    }
                },
                Outcome::Failed(why) => {
                    let _ = writeln!(out, "{name:<24} error      {why}");
                }
            }
        }
        let _ = writeln!(out, "{}", row("TOTAL", "", &self.totals));
        if !self.totals.nacks.is_empty() {
            let _ = writeln!(out, "rejected by:");
            for n in &self.totals.nacks {
                let _ = writeln!(
                    out,
                    "  {} ({}): {}",
                    n.proxy,
                    short_type(&n.type_url),
                    n.message
                );
            }
        }
        let t = &self.totals;
        let _ = writeln!(
            out,
            "{}",
            match self.verdict {
                Verdict::Converged => format!(
                    "converged: {} of {} concerned proxies ACKed ({} left before answering)",
                    t.acked, t.concerned, t.gone
                ),
                Verdict::Nacked => format!("rejected: {} proxies NACKed it", t.nacked),
                Verdict::Pending => format!("pending: {} proxies have not answered yet", t.pending),
                Verdict::Unknown => "unknown: not every edge could say".to_string(),
            }
        );
        out
    }
}

fn row(name: &str, state: &str, c: &RevisionCounts) -> String {
    format!(
        "{name:<24} {state:<10} {:>10} {:>10} {:>10} {:>7} {:>7} {:>8}",
        c.concerned, c.sent, c.acked, c.nacked, c.gone, c.pending
    )
}

fn add(totals: &mut RevisionCounts, c: &RevisionCounts) {
    totals.concerned += c.concerned;
    totals.sent += c.sent;
    totals.acked += c.acked;
    totals.nacked += c.nacked;
    totals.gone += c.gone;
    totals.pending += c.pending;
    let room = MAX_NACKS_SHOWN.saturating_sub(totals.nacks.len());
    totals.nacks.extend(c.nacks.iter().take(room).cloned());
    if totals.changes.is_empty() {
        totals.changes.clone_from(&c.changes);
        totals.changed = c.changed;
        totals.full = c.full;
    }
}

/// `type.googleapis.com/envoy.config.cluster.v3.Cluster` → `Cluster`.
fn short_type(type_url: &str) -> &str {
    type_url.rsplit('.').next().unwrap_or(type_url)
}
