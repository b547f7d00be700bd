//! The Grafana dashboard's shape: what Grafana's provisioning and an operator need of it.
//! Its queries run against a real Prometheus in `prometheus.rs`.

use crate::dashboard;
use serde_json::Value;
use std::collections::BTreeSet;

const DATASOURCE: &str = "${datasource}";

fn panels(dashboard: &Value) -> &[Value] {
    dashboard["panels"].as_array().expect("panels")
}

#[test]
fn the_dashboard_picks_its_prometheus_with_a_variable() {
    let dashboard = dashboard();
    let schema = dashboard["schemaVersion"].as_u64().expect("schemaVersion");
    assert!(schema >= 38, "schemaVersion {schema}");
    assert!(dashboard["uid"].is_string() && dashboard["title"].is_string());
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("variables");
    let datasource = variables
        .iter()
        .find(|v| v["name"] == "datasource")
        .expect("a datasource variable");
    assert_eq!(datasource["type"], "datasource");
    assert_eq!(datasource["query"], "prometheus");
    for variable in variables.iter().filter(|v| v["type"] == "query") {
        assert_eq!(variable["datasource"]["uid"], DATASOURCE, "{variable}");
    }
    for panel in panels(&dashboard).iter().filter(|p| p["type"] != "row") {
        let title = &panel["title"];
        assert_eq!(panel["datasource"]["uid"], DATASOURCE, "{title}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}");
        let mut ref_ids = BTreeSet::new();
        for target in targets {
            assert_eq!(target["datasource"]["uid"], DATASOURCE, "{title}");
            assert!(ref_ids.insert(target["refId"].as_str().unwrap()), "{title}");
            let expr = target["expr"].as_str().unwrap_or_default();
            assert!(!expr.is_empty(), "{title}");
            // Every tier's series, or those of the namespace picked.
            assert!(
                expr.contains("namespace=~\"$namespace\""),
                "{title}: {expr}"
            );
        }
    }
}

#[test]
fn the_dashboard_has_a_row_per_tier_and_panels_on_the_grid() {
    let dashboard = dashboard();
    let rows: Vec<&str> = panels(&dashboard)
        .iter()
        .filter(|p| p["type"] == "row")
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    for tier in ["Edge", "Builder", "Ingest"] {
        assert!(
            rows.iter().any(|r| r.starts_with(tier)),
            "no {tier} row: {rows:?}"
        );
    }
    let mut ids = BTreeSet::new();
    let mut cells = BTreeSet::new();
    for panel in panels(&dashboard) {
        assert!(ids.insert(panel["id"].as_u64().expect("an id")), "{panel}");
        let grid = &panel["gridPos"];
        let [x, y, w, h] = ["x", "y", "w", "h"].map(|k| grid[k].as_u64().expect("gridPos"));
        assert!(w > 0 && h > 0 && x + w <= 24, "{}: {grid}", panel["title"]);
        for cell in (x..x + w).flat_map(|x| (y..y + h).map(move |y| (x, y))) {
            assert!(
                cells.insert(cell),
                "{} overlaps another panel",
                panel["title"]
            );
        }
    }
}

/// What the issue asks the dashboard to show, by the metrics that show it.
#[test]
fn the_dashboard_shows_pushes_convergence_lag_nacks_proxies_relays_handoffs_queue_and_readiness() {
    let queries = crate::dashboard_queries(&dashboard()).join("\n");
    for metric in [
        "pilot_xds_pushes_total",
        "pilot_proxy_convergence_time_bucket",
        "shoal_edge_snapshot_version",
        "pilot_total_xds_rejects_total",
        "pilot_xds{",
        "shoal_xds_relayed_streams",
        "shoal_xds_handoffs_total",
        "shoal_xds_push_queue_depth",
        "shoal_edge_snapshot_timestamp_seconds",
        "shoal_builder_snapshot_timestamp_seconds",
        "shoal_ready",
    ] {
        assert!(queries.contains(metric), "no panel reads {metric}");
    }
}
