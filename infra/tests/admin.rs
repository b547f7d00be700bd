//! The admin server over real HTTP: metrics, readiness, debug pages, graceful shutdown.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use serde_json::json;
use shoal_infra::admin::{AdminServer, Readiness};
use shoal_infra::runtime::Drain;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn serves_metrics_readiness_and_debug_until_drained() {
    let mut registry = Registry::default();
    let pushes = Counter::<u64>::default();
    registry.register("pilot_xds_pushes", "Pushes", pushes.clone());
    pushes.inc();
    let readiness = Readiness::new();
    let admin = AdminServer::new(registry, readiness.clone())
        .debug("syncz", Arc::new(|| json!({"proxies": 2})))
        .debug_query(
            "config_dump",
            Arc::new(|q: &BTreeMap<String, String>| json!({ "proxy": q.get("proxy") })),
        );
    let bound = admin.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let base = format!("http://{}", bound.local_addr());
    let drain = Drain::new();
    let server = tokio::spawn(bound.serve(drain.watcher().wait()));
    let http = reqwest::Client::new();

    let metrics = http.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(metrics.status(), 200);
    let content_type = metrics.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let body = metrics.text().await.unwrap();
    assert!(body.contains("pilot_xds_pushes_total 1"), "{body}");
    assert!(body.contains("\nshoal_ready 0\n"), "{body}");
    assert!(body.ends_with("# EOF\n"));

    let ready = http
        .get(format!("{base}/healthz/ready"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    readiness.set_ready(true);
    let ready = http
        .get(format!("{base}/healthz/ready"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    assert_eq!(ready.text().await.unwrap(), "ready");
    let body = http.get(format!("{base}/metrics")).send().await.unwrap();
    let body = body.text().await.unwrap();
    assert!(body.contains("\nshoal_ready 1\n"), "{body}");

    let syncz: serde_json::Value = http
        .get(format!("{base}/debug/syncz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(syncz, json!({"proxies": 2}));
    let dump: serde_json::Value = http
        .get(format!("{base}/debug/config_dump?proxy=p1"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(dump, json!({"proxy": "p1"}));
    let index: Vec<String> = http
        .get(format!("{base}/debug"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(index, ["/debug/config_dump", "/debug/syncz"]);
    let missing = http.get(format!("{base}/debug/nope")).send().await.unwrap();
    assert_eq!(missing.status(), 404);

    assert!(drain.signal_and_wait(Duration::from_secs(5)).await);
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("server stops after drain")
        .unwrap()
        .unwrap();
}
