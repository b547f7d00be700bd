//! A real Prometheus scrapes the all-in-one `shoal` every second with the chart's alert
//! rules loaded; a real Envoy rejects a VirtualService and the NACK alert fires.

use crate::served::{SYNC, Served, eventually, type_states, virtual_service_envoy_rejects};
use crate::support::free_port;
use crate::support::process::{Proc, wait_http_ok};
use crate::{alerts, dashboard, dashboard_queries, debian_tool, rules, shoal_metric_names};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

/// The alert a NACK fires.
const NACK_ALERT: &str = "ShoalXdsRejected";

/// Metric families the tiers register but expose only from their first sample on (label
/// sets made on first use), which this test does not cause: a superseded nonce, a relay
/// to another edge, an object Istio's validation rejects, a transport retry.
const EXPOSED_ONCE_USED: [&str; 4] = [
    "pilot_xds_expired_nonce_total",
    "shoal_xds_relay_failures_total",
    "shoal_ingest_config_rejected_total",
    "shoal_ingest_transport_retries_total",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scraping_shoal_fires_the_nack_alert_when_envoy_rejects_a_config() {
    let served = Served::start().await;
    let (http, admin) = (served.http, served.admin.as_str());
    let mut prometheus = Prometheus::start(http, served.dir.path()).await;
    let server = &prometheus;
    // Every rule evaluates against the real series, and a healthy shoal fires none.
    eventually("the rules evaluate on a scrape", SYNC, || async move {
        let proxies = server.query("pilot_xds{job=\"shoal\"}").await;
        let scraped = proxies.as_array().is_some_and(|s| s.len() == 1);
        let groups = server.api("rules").await["groups"].clone();
        let healthy = groups
            .as_array()?
            .iter()
            .flat_map(|g| g["rules"].as_array().into_iter().flatten())
            .all(|r| r["health"] == "ok");
        (scraped && healthy).then_some(())
    })
    .await;
    let before = prometheus.active_alerts().await;
    assert!(before.is_empty(), "alerts before any NACK: {before:#?}");

    let vs = served.config_dir.join("routing/virtual-service.yaml");
    std::fs::write(vs, virtual_service_envoy_rejects()).expect("edit");
    let written = Instant::now();
    let nack = eventually("Envoy NACKs the routes", SYNC, || async move {
        let (_, rds) = type_states(admin)
            .await
            .into_iter()
            .find(|(t, _)| t == "rds")?;
        (rds["state"] == "NACKED").then(|| rds["nack"]["message"].to_string())
    })
    .await;
    assert!(nack.contains("program size"), "Envoy's error: {nack}");

    let alert = eventually(
        "the NACK alert fires",
        Duration::from_secs(60),
        || async move {
            let alerts = server.active_alerts().await;
            alerts
                .into_iter()
                .find(|a| a["labels"]["alertname"] == NACK_ALERT && a["state"] == "firing")
        },
    )
    .await;
    println!(
        "{NACK_ALERT} firing {:.1}s after the edit: {}",
        written.elapsed().as_secs_f64(),
        alert["annotations"]["summary"]
    );
    assert_eq!(alert["labels"]["type"], "rds", "{alert:#}");
    assert_eq!(alert["labels"]["severity"], "warning", "{alert:#}");
    let instance = format!("127.0.0.1:{http}");
    assert_eq!(alert["labels"]["instance"], instance.as_str(), "{alert:#}");
    let summary = alert["annotations"]["summary"].as_str().unwrap();
    assert!(summary.contains(&instance), "{summary}");
    let others: Vec<Value> = prometheus
        .active_alerts()
        .await
        .into_iter()
        .filter(|a| a["labels"]["alertname"] != NACK_ALERT)
        .collect();
    assert!(others.is_empty(), "other alerts: {others:#?}");

    dashboard_and_rules_read_what_shoal_exports(&prometheus).await;

    prometheus.proc.stop(Duration::from_secs(5));
    served.stop();
}

/// The dashboard's and the rules' metrics are ones shoal exports (it has exported them to
/// `prometheus`), and every dashboard query is PromQL that Prometheus runs.
async fn dashboard_and_rules_read_what_shoal_exports(prometheus: &Prometheus) {
    let exported: BTreeSet<String> = prometheus
        .api("label/__name__/values")
        .await
        .as_array()
        .expect("names")
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect();
    let queries = dashboard_queries(&dashboard());
    let rules = rules();
    let rule_exprs = alerts(&rules)
        .into_iter()
        .map(|a| a["expr"].as_str().unwrap().to_owned());
    for expr in queries.iter().cloned().chain(rule_exprs) {
        for name in shoal_metric_names(&expr) {
            assert!(
                exported.contains(&name) || EXPOSED_ONCE_USED.contains(&name.as_str()),
                "{name} is not a metric shoal exports (query: {expr})"
            );
        }
    }
    for expr in &queries {
        let expr = expr
            .replace("$namespace", ".*")
            .replace("$__rate_interval", "30s");
        let answer = prometheus.try_query(&expr).await;
        assert_eq!(answer["status"], "success", "{expr}: {answer}");
    }
}

/// Debian's `prometheus`, scraping the all-in-one's admin port every second as job
/// `shoal`, evaluating the chart's rules every second.
struct Prometheus {
    proc: Proc,
    url: String,
    client: reqwest::Client,
}

impl Prometheus {
    async fn start(shoal_http: u16, dir: &Path) -> Prometheus {
        // The shipped rules, but for the NACK alert's `for:` (1m), cut to 2s so the test
        // waits seconds for it to fire: nothing else of the rules changes.
        let mut rules = rules();
        for group in rules["groups"].as_array_mut().expect("groups") {
            for rule in group["rules"].as_array_mut().expect("rules") {
                if rule["alert"] == NACK_ALERT {
                    rule["for"] = "2s".into();
                }
            }
        }
        let rules_file = dir.join("shoal-alerts.yaml");
        std::fs::write(&rules_file, serde_norway::to_string(&rules).unwrap()).expect("rules");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files: ['{}']\n\
             scrape_configs:\n  - job_name: shoal\n    static_configs:\n      - targets: ['127.0.0.1:{shoal_http}']\n",
            rules_file.display()
        );
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config).expect("prometheus.yml");
        let port = free_port();
        let proc = Proc::spawn(
            "prometheus",
            &debian_tool("prometheus", "SHOAL_PROMETHEUS"),
            &[
                format!("--config.file={}", config_file.display()),
                format!("--storage.tsdb.path={}", dir.join("tsdb").display()),
                format!("--web.listen-address=127.0.0.1:{port}"),
            ],
            &[],
            dir,
        );
        let url = format!("http://127.0.0.1:{port}");
        assert!(
            wait_http_ok(&format!("{url}/-/ready"), Duration::from_secs(30)).await,
            "prometheus not ready"
        );
        Prometheus {
            proc,
            url,
            client: reqwest::Client::new(),
        }
    }

    /// `GET /api/v1/<path>`'s `data`.
    async fn api(&self, path: &str) -> Value {
        let body: Value = self
            .client
            .get(format!("{}/api/v1/{path}", self.url))
            .send()
            .await
            .expect("prometheus answers")
            .json()
            .await
            .expect("JSON");
        assert_eq!(body["status"], "success", "{path}: {body}");
        body["data"].clone()
    }

    /// An instant query's whole answer, error or not.
    async fn try_query(&self, expr: &str) -> Value {
        self.client
            .get(format!("{}/api/v1/query", self.url))
            .query(&[("query", expr)])
            .send()
            .await
            .expect("prometheus answers")
            .json()
            .await
            .expect("JSON")
    }

    /// An instant query's result.
    async fn query(&self, expr: &str) -> Value {
        let answer = self.try_query(expr).await;
        assert_eq!(answer["status"], "success", "{expr}: {answer}");
        answer["data"]["result"].clone()
    }

    /// Alerts pending or firing.
    async fn active_alerts(&self) -> Vec<Value> {
        self.api("alerts").await["alerts"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}
