//! The alert rules, as promtool checks them and as operators read them.

use crate::{RULES, alerts, promtool, rules, support::workspace_root};

#[test]
fn promtool_checks_the_rules() {
    let out = promtool(&["check", "rules", RULES], &workspace_root());
    assert!(out.contains("SUCCESS"), "{out}");
}

/// `shoal-alerts.test.yaml`: the NACK alert on a type's first NACK and on later ones,
/// imbalance, snapshot lag, convergence, targets down, unready pods and tiers
/// (`shoal_ready`), an ingest that publishes nothing, an edge without a snapshot.
#[test]
fn promtool_unit_tests_of_the_rules_pass() {
    let out = promtool(
        &["test", "rules", "tests/monitoring/shoal-alerts.test.yaml"],
        &workspace_root(),
    );
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn every_alert_names_where_it_fires_how_bad_it_is_and_waits() {
    let rules = rules();
    let alerts = alerts(&rules);
    assert!(!alerts.is_empty());
    for alert in alerts {
        let name = alert["alert"].as_str().unwrap();
        assert!(name.starts_with("Shoal"), "{name}");
        let severity = alert["labels"]["severity"].as_str();
        assert!(
            matches!(severity, Some("warning" | "critical")),
            "{name}: severity {severity:?}"
        );
        assert!(alert["for"].is_string(), "{name}: no `for`");
        for key in ["summary", "description"] {
            let text = alert["annotations"][key].as_str().unwrap_or_default();
            // The pod (or the target, outside Kubernetes), or the tier's job.
            assert!(
                text.contains("$labels.pod") || text.contains("$labels.job"),
                "{name}: its {key} names no pod or tier: {text:?}"
            );
        }
    }
}
