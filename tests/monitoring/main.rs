//! The monitoring the chart ships (`deploy/helm/shoal/rules`, `deploy/helm/shoal/dashboards`)
//! checked with the real tools: `promtool check rules` and `promtool test rules` on the
//! alert rules, the dashboard's shape as Grafana reads it, and a real Prometheus scraping
//! the all-in-one `shoal` with the rules loaded, whose NACK alert fires when a real Envoy
//! rejects a config; `shoal status --wait` answering whether a revision reached that Envoy;
//! CSDS answering a real `grpcio` client about that Envoy (`csds.rs`); `shoal proxy-config`
//! against that Envoy's own config dump (`proxy_config.rs`).
//!
//! `prometheus` and `promtool` come from Debian's `prometheus` package (`make setup`
//! installs it); `SHOAL_PROMETHEUS` and `SHOAL_PROMTOOL` override where they are found.

#[path = "../support/mod.rs"]
mod support;

mod csds;
mod dashboard;
mod prometheus;
mod proxy_config;
mod rules;
mod served;
mod status;

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The rules file the chart's PrometheusRule holds.
const RULES: &str = "deploy/helm/shoal/rules/shoal-alerts.yaml";
/// The dashboard the chart's ConfigMap holds.
const DASHBOARD: &str = "deploy/helm/shoal/dashboards/shoal.json";

fn read(path: &str) -> String {
    let path = support::workspace_root().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The alert rules, parsed.
fn rules() -> Value {
    serde_norway::from_str(&read(RULES)).expect("the rules file is YAML")
}

/// Every alerting rule of every group.
fn alerts(rules: &Value) -> Vec<&Value> {
    rules["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules"))
        .filter(|r| r["alert"].is_string())
        .collect()
}

/// The dashboard, parsed.
fn dashboard() -> Value {
    serde_json::from_str(&read(DASHBOARD)).expect("the dashboard is JSON")
}

/// Every query of every panel of the dashboard.
fn dashboard_queries(dashboard: &Value) -> Vec<String> {
    dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .map(|t| t["expr"].as_str().expect("a query").to_owned())
        .collect()
}

/// The names of Shoal's metrics (Istio's `pilot_`/`citadel_` and its own `shoal_`) a
/// PromQL expression reads.
fn shoal_metric_names(expr: &str) -> BTreeSet<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|token| {
            ["pilot_", "citadel_", "shoal_"]
                .iter()
                .any(|p| token.starts_with(p))
        })
        .map(str::to_owned)
        .collect()
}

/// A binary of Debian's `prometheus` package: `$env` if set, else `name` on PATH.
/// Panics, saying how to install it, when there is none (as the Redis fixture does).
fn debian_tool(name: &str, env: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env) {
        return PathBuf::from(path);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{name} not found: install Debian's prometheus package (`make setup` does: \
                 apt-get install prometheus), or set {env} to its path"
            )
        })
}

/// Runs `promtool` with `args` in `dir`; its output, or a panic with it.
fn promtool(args: &[&str], dir: &Path) -> String {
    let out = std::process::Command::new(debian_tool("promtool", "SHOAL_PROMTOOL"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run promtool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}
