//! Proxy status rows in `istioctl proxy-status`'s columns, from the edges' `/debug/syncz`
//! (no I/O here).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One proxy as an edge's `/debug/syncz` lists it (the fields read here).
#[derive(Clone, Debug, Deserialize)]
pub struct Synced {
    pub proxy: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub protocol: String,
    /// By short type name (`cds`, `lds`, `eds`, `rds`, ...).
    #[serde(default)]
    pub types: BTreeMap<String, TypeSync>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct TypeSync {
    /// `SYNCED`, `NACKED`, `STALE` or `NOT_SENT`.
    pub state: String,
    #[serde(default)]
    pub version_sent: String,
    #[serde(default)]
    pub version_acked: String,
    #[serde(default)]
    pub nack: Option<Nack>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct Nack {
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub message: String,
}

/// One row: a proxy, the state of each main type, the edge serving it and the newest
/// revision it ACKed.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub proxy: String,
    /// `pod.namespace`, as istioctl names it.
    pub name: String,
    pub protocol: String,
    pub cds: String,
    pub lds: String,
    pub eds: String,
    pub rds: String,
    pub edge: String,
    /// The newest revision the proxy ACKed. A type is sent again only when a revision
    /// changes it, so an unchanged type keeps an older version; the columns say whether
    /// any type is behind (STALE) or rejected (NACKED).
    pub revision: Option<u64>,
    /// Every type the stream watches, as the edge reports it.
    pub types: BTreeMap<String, TypeSync>,
    /// One proxy asked for: its edge's `/debug/config_diff` (what it ACKed against what
    /// the edge would send now).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_diff: Option<serde_json::Value>,
    /// The admin address of the edge serving it (what was asked).
    #[serde(skip)]
    pub admin: String,
}

impl Row {
    /// `synced` as listed by the edge named `edge` at admin address `admin`.
    pub fn new(synced: Synced, edge: &str, admin: &str) -> Row {
        let state = |t: &str| match synced.types.get(t) {
            Some(s) => shown(&s.state).to_string(),
            None => "NOT SENT".to_string(),
        };
        let revision = synced
            .types
            .values()
            .filter_map(|t| t.version_acked.parse::<u64>().ok())
            .max();
        Row {
            name: pod_name(&synced.proxy, &synced.namespace),
            cds: state("cds"),
            lds: state("lds"),
            eds: state("eds"),
            rds: state("rds"),
            edge: edge.to_string(),
            revision,
            protocol: synced.protocol,
            proxy: synced.proxy,
            types: synced.types,
            config_diff: None,
            admin: admin.to_string(),
        }
    }

    pub fn synced(&self) -> bool {
        [&self.cds, &self.lds, &self.eds, &self.rds]
            .iter()
            .all(|s| *s == "SYNCED" || *s == "NOT SENT")
    }
}

/// A state as istioctl prints it.
fn shown(state: &str) -> &str {
    match state {
        "NOT_SENT" => "NOT SENT",
        other => other,
    }
}

/// `sidecar~10.0.0.1~reviews-v1-abc.shop~shop.svc.cluster.local` → `reviews-v1-abc.shop`.
fn pod_name(proxy: &str, namespace: &str) -> String {
    match proxy.split('~').nth(2) {
        Some(name) if !name.is_empty() => name.to_string(),
        _ if namespace.is_empty() => proxy.to_string(),
        _ => format!("{proxy}.{namespace}"),
    }
}

/// The table, sorted by name, in istioctl's columns (`EDGE` for `ISTIOD`, `REVISION` for
/// `VERSION`).
pub fn table(rows: &[Row]) -> String {
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<width$}  {:<9} {:<9} {:<9} {:<9} {:<20} REVISION",
        "NAME", "CDS", "LDS", "EDS", "RDS", "EDGE"
    );
    for r in rows {
        let revision = r.revision.map_or("-".to_string(), |v| v.to_string());
        let _ = writeln!(
            out,
            "{:<width$}  {:<9} {:<9} {:<9} {:<9} {:<20} {revision}",
            r.name, r.cds, r.lds, r.eds, r.rds, r.edge
        );
    }
    out
}

/// One proxy in full: each type's state, versions and NACK.
pub fn detail(row: &Row) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "proxy {} ({}) on {}",
        row.proxy, row.protocol, row.edge
    );
    for (t, s) in &row.types {
        let _ = writeln!(
            out,
            "  {t:<6} {:<9} sent {:<8} acked {}",
            shown(&s.state),
            or_dash(&s.version_sent),
            or_dash(&s.version_acked)
        );
        if let Some(n) = &s.nack {
            let _ = writeln!(
                out,
                "         rejected {}: {}",
                or_dash(&n.version),
                n.message
            );
        }
    }
    out
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}
