//! One proxy's config diff as `istioctl proxy-status <pod>` prints it: per type, whether
//! what the proxy ACKed matches what its edge would send now, and where not, a unified
//! diff of each resource in Envoy's JSON (from the edge's `/debug/config_diff`; no I/O).

use serde::Deserialize;
use serde_json::Value;
use similar::TextDiff;
use std::fmt::Write as _;

/// An edge's `/debug/config_diff` answer (the fields read here).
#[derive(Debug, Deserialize)]
pub struct ConfigDiff {
    pub types: Vec<TypeDiff>,
}

#[derive(Debug, Deserialize)]
pub struct TypeDiff {
    pub type_url: String,
    #[serde(default)]
    pub acked_version: String,
    #[serde(default)]
    pub edge_version: Option<u64>,
    #[serde(default)]
    pub matches: bool,
    #[serde(default)]
    pub resources: Vec<ResourceDiff>,
    /// The edge could not generate the type now.
    #[serde(default)]
    pub error: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct ResourceDiff {
    pub name: String,
    pub acked: Option<Value>,
    pub edge: Option<Value>,
}

/// istioctl's name for a type's config.
fn kind(type_url: &str) -> &str {
    match type_url.rsplit('.').next().unwrap_or(type_url) {
        "Cluster" => "Clusters",
        "Listener" => "Listeners",
        "RouteConfiguration" => "Routes",
        "ClusterLoadAssignment" => "Endpoints",
        "Secret" => "Secrets",
        other => other,
    }
}

/// `Clusters Match`, or `Routes Don't Match` and a unified diff per resource (`---` what
/// the proxy ACKed, `+++` what the edge would send).
pub fn render(diff: &ConfigDiff) -> String {
    let mut out = String::new();
    for t in &diff.types {
        let kind = kind(&t.type_url);
        if let Some(error) = &t.error {
            let _ = writeln!(out, "{kind}: cannot compare: {error}");
            continue;
        }
        if t.matches {
            let _ = writeln!(out, "{kind} Match");
            continue;
        }
        let edge = t.edge_version.map_or("-".to_string(), |v| v.to_string());
        let acked = if t.acked_version.is_empty() {
            "none"
        } else {
            &t.acked_version
        };
        let _ = writeln!(
            out,
            "{kind} Don't Match (ACKed version {acked}, the edge at {edge})"
        );
        for r in &t.resources {
            let acked = pretty(r.acked.as_ref());
            let edge = pretty(r.edge.as_ref());
            let text = TextDiff::from_lines(&acked, &edge);
            let _ = write!(
                out,
                "{}",
                text.unified_diff().context_radius(3).header(
                    &format!("{} (ACKed)", r.name),
                    &format!("{} (edge)", r.name),
                )
            );
        }
    }
    out
}

fn pretty(v: Option<&Value>) -> String {
    match v {
        Some(v) => serde_json::to_string_pretty(v).unwrap_or_default() + "\n",
        None => String::new(),
    }
}
