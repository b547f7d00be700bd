//! `shoal status --wait` and `shoal proxy-status` against the all-in-one and a real Envoy:
//! 0 once a good change is ACKed, 1 (naming the proxy and Envoy's words) once a change is
//! NACKed.

use crate::served::{SYNC, Served, eventually, virtual_service_envoy_rejects};
use crate::support::mesh;
use serde_json::Value;
use std::path::Path;
use std::process::Output;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shoal_status_and_proxy_status_follow_a_revision_to_a_real_envoy() {
    let served = Served::start().await;
    let (http, admin) = (served.http, served.admin.as_str());
    let edges = format!("127.0.0.1:{http}");
    let before = latest_pushed(admin).await;

    // A good change: the revision that carries it is followed until Envoy ACKs it.
    let vs = served.config_dir.join("routing/virtual-service.yaml");
    std::fs::write(&vs, mesh::virtual_service(30)).expect("edit");
    let good = pushed_after(admin, before).await;
    let out = status(&edges, good, &["--wait", "--timeout", "30s", "-o", "json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["verdict"], "converged", "{report:#}");
    assert!(report["totals"]["acked"].as_u64() >= Some(1), "{report:#}");
    assert_eq!(report["totals"]["pending"], 0, "{report:#}");
    // `shoal proxy-status`: the Envoy in istioctl's columns, synced at that revision.
    let out = run_shoal(&["proxy-status", "--edges", &edges]).await;
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.starts_with("NAME "), "{shown}");
    let row = shown
        .lines()
        .find(|l| l.contains("productpage"))
        .expect("the proxy");
    assert_eq!(row.matches("SYNCED").count(), 4, "{shown}");
    assert!(
        row.ends_with(&good.to_string()),
        "holds revision {good}: {shown}"
    );

    // A change Envoy rejects: non-zero at once, naming the proxy and Envoy's error.
    std::fs::write(&vs, virtual_service_envoy_rejects()).expect("edit");
    let bad = pushed_after(admin, good).await;
    let out = status(&edges, bad, &["--wait", "--timeout", "20s"]).await;
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("productpage"), "names the proxy: {shown}");
    assert!(shown.contains("program size"), "Envoy's error: {shown}");
    assert!(shown.contains("rejected: 1 proxies NACKed it"), "{shown}");
    let out = run_shoal(&["proxy-status", "--edges", &edges]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("NACKED"), "{}", text(&out));

    // The latest by default; a bad address is one clear line and exit 3.
    let out = status(&edges, None, &[]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let out = status("127.0.0.1:1", None, &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));

    served.stop();
}

/// `shoal status --edges EDGES [--revision R] ARGS`.
async fn status(edges: &str, revision: impl Into<Option<u64>>, args: &[&str]) -> Output {
    let revision = revision.into().map(|r| r.to_string());
    let mut all = vec!["status", "--edges", edges];
    if let Some(r) = &revision {
        all.extend(["--revision", r]);
    }
    all.extend(args);
    run_shoal(&all).await
}

/// `shoal ARGS`, its output collected.
pub(crate) async fn run_shoal(args: &[&str]) -> Output {
    tokio::process::Command::new(Path::new(env!("CARGO_BIN_EXE_shoal")))
        .args(args)
        .output()
        .await
        .expect("shoal runs")
}

pub(crate) fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The newest revision the edge pushed (0: none).
pub(crate) async fn latest_pushed(admin: &str) -> u64 {
    let answer: Value = reqwest::get(format!("{admin}/debug/push_status"))
        .await
        .expect("push_status")
        .json()
        .await
        .expect("JSON");
    answer["latest_pushed"].as_u64().unwrap_or(0)
}

/// Waits for a revision pushed after `before`: the file change reached the edge.
pub(crate) async fn pushed_after(admin: &str, before: u64) -> u64 {
    eventually("the change is pushed", SYNC, || async move {
        let latest = latest_pushed(admin).await;
        (latest > before).then_some(latest)
    })
    .await
}
