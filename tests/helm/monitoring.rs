//! The monitoring the chart ships, each part behind its value: a PodMonitor naming each
//! tier's job as the alert rules expect, the rules file as a PrometheusRule, the Grafana
//! dashboard in a ConfigMap for Grafana's sidecar. `tests/monitoring` checks the rules and
//! the dashboard themselves.

use crate::chart::{
    NAMESPACE, chart_dir, containers, every_values_file, name, pod_labels, read_yaml, render,
    run_helm, selects, try_render,
};
use serde_json::Value;

const ALL_ON: [&str; 3] = [
    "monitoring.podMonitor.enabled=true",
    "monitoring.rules.enabled=true",
    "monitoring.dashboards.enabled=true",
];

const KINDS: [(&str, &str); 3] = [
    ("PodMonitor", "monitoring.coreos.com/v1"),
    ("PrometheusRule", "monitoring.coreos.com/v1"),
    ("ConfigMap", "v1"),
];

#[test]
fn monitoring_is_off_unless_asked_for() {
    for r in every_values_file() {
        for (kind, _) in KINDS {
            assert!(
                r.of_kind(kind).next().is_none(),
                "{}: a {kind} without monitoring values",
                r.values_file
            );
        }
    }
    let r = render("values.yaml", &ALL_ON);
    for (kind, api_version) in KINDS {
        let objects: Vec<&Value> = r.of_kind(kind).collect();
        assert_eq!(objects.len(), 1, "{kind}");
        assert_eq!(objects[0]["apiVersion"], api_version, "{kind}");
    }
    let dir = chart_dir();
    let (chart, values) = (dir.to_str().unwrap(), dir.join("values.yaml"));
    let mut args = vec!["lint", "--strict", chart, "--namespace", NAMESPACE];
    args.extend(["--values", values.to_str().unwrap()]);
    for set in ALL_ON {
        args.extend(["--set", set]);
    }
    if let Err(e) = run_helm(&args) {
        panic!("helm lint with monitoring on:\n{e}");
    }
}

#[test]
fn the_pod_monitor_scrapes_every_tier_as_the_job_the_rules_name() {
    let r = render(
        "values.yaml",
        &[
            "monitoring.podMonitor.enabled=true",
            "monitoring.podMonitor.labels.release=kube-prometheus-stack",
            "monitoring.podMonitor.interval=30s",
        ],
    );
    let monitor = r.of_kind("PodMonitor").next().expect("a PodMonitor");
    assert_eq!(monitor["metadata"]["namespace"], NAMESPACE);
    assert_eq!(
        monitor["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
    let spec = &monitor["spec"];
    assert_eq!(spec["namespaceSelector"]["matchNames"][0], NAMESPACE);
    let [endpoint] = spec["podMetricsEndpoints"].as_array().unwrap().as_slice() else {
        panic!("one endpoint: {spec}");
    };
    assert_eq!(endpoint["path"], "/metrics");
    assert_eq!(endpoint["interval"], "30s");
    let relabel = endpoint["relabelings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["targetLabel"] == "job")
        .expect("the job relabeled");
    assert_eq!(
        relabel["sourceLabels"][0],
        "__meta_kubernetes_pod_label_app_kubernetes_io_component"
    );
    let rules = std::fs::read_to_string(chart_dir().join("rules/shoal-alerts.yaml")).unwrap();
    for binary in ["ingest", "builder", "edge"] {
        let deployment = r.deployment_of(binary);
        let labels = pod_labels(deployment);
        assert!(
            selects(&spec["selector"]["matchLabels"], labels),
            "{binary}"
        );
        let component = labels["app.kubernetes.io/component"].as_str().unwrap();
        let in_set = spec["selector"]["matchExpressions"][0]["values"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == component);
        assert!(in_set, "{binary}: component {component}");
        let port = endpoint["port"].as_str().unwrap();
        let ports = containers(deployment)[0]["ports"].as_array().unwrap();
        assert!(ports.iter().any(|p| p["name"] == port), "{binary}: {port}");
        // The job the rules and the dashboard select the tier by.
        let job = relabel["replacement"]
            .as_str()
            .unwrap()
            .replace("$1", component);
        assert_eq!(job, format!("shoal-{binary}"));
        assert!(
            rules.contains(&format!("|{job}")),
            "the rules never name {job}"
        );
    }
}

#[test]
fn the_prometheus_rule_holds_the_rules_file_unchanged() {
    let r = render(
        "values.yaml",
        &[
            "monitoring.rules.enabled=true",
            "monitoring.rules.labels.release=kube-prometheus-stack",
        ],
    );
    let rule = r
        .of_kind("PrometheusRule")
        .next()
        .expect("a PrometheusRule");
    assert_eq!(rule["metadata"]["namespace"], NAMESPACE);
    assert_eq!(
        rule["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
    let file = read_yaml(&chart_dir().join("rules/shoal-alerts.yaml"));
    assert_eq!(rule["spec"]["groups"], file["groups"]);
}

#[test]
fn the_dashboard_configmap_holds_the_dashboard_for_grafanas_sidecar() {
    let r = render("values.yaml", &["monitoring.dashboards.enabled=true"]);
    let configmap = r.of_kind("ConfigMap").next().expect("a ConfigMap");
    assert_eq!(configmap["metadata"]["namespace"], NAMESPACE);
    assert_eq!(configmap["metadata"]["labels"]["grafana_dashboard"], "1");
    let json = configmap["data"]["shoal.json"]
        .as_str()
        .expect("shoal.json");
    let rendered: Value = serde_json::from_str(json).expect("JSON");
    let file = std::fs::read_to_string(chart_dir().join("dashboards/shoal.json")).unwrap();
    assert_eq!(rendered, serde_json::from_str::<Value>(&file).unwrap());

    let r = render(
        "values.yaml",
        &[
            "monitoring.dashboards.enabled=true",
            "monitoring.dashboards.namespace=monitoring",
            "monitoring.dashboards.annotations.grafana_folder=Shoal",
        ],
    );
    let configmap = r.of_kind("ConfigMap").next().unwrap();
    assert_eq!(configmap["metadata"]["namespace"], "monitoring");
    assert_eq!(
        configmap["metadata"]["annotations"]["grafana_folder"],
        "Shoal"
    );
    assert!(
        name(configmap).ends_with("-dashboard"),
        "{}",
        name(configmap)
    );
}

#[test]
fn the_schema_refuses_unknown_or_mistyped_monitoring_values() {
    for set in [
        "monitoring.rules.bogus=1",
        "monitoring.dashboards.enabled=yes",
        "monitoring.podMonitor.interval=fast",
    ] {
        let err = try_render("values.yaml", &[set])
            .err()
            .unwrap_or_else(|| panic!("{set} was accepted"));
        assert!(err.contains("monitoring"), "{set}: {err}");
    }
}
