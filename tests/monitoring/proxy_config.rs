//! `shoal proxy-config` and `shoal proxy-status PROXY` against a real Envoy: the config
//! dump Shoal writes from what the proxy ACKed equals Envoy's own `/config_dump`, before and
//! after Envoy rejects a change (Envoy keeps its config; so does the dump), and the diff
//! names what the edge would send.

use crate::served::{SYNC, eventually, type_states};
use crate::served::{Served, virtual_service_envoy_rejects};
use crate::status::{latest_pushed, pushed_after, run_shoal, text};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dump_equals_envoys_own_and_the_diff_names_what_it_rejected() {
    let served = Served::start().await;
    let edges = format!("127.0.0.1:{}", served.http);
    let syncz: Value = reqwest::get(format!("{}/debug/syncz", served.admin))
        .await
        .expect("syncz")
        .json()
        .await
        .expect("JSON");
    let proxy = syncz[0]["proxy"].as_str().expect("the proxy").to_string();

    let ours = proxy_config(&edges, &proxy, &[]).await;
    let envoys = served.envoy_config_dump().await;
    for (kind, list, item) in KINDS {
        let (ours, theirs) = (
            resources(&ours, kind, list, item),
            resources(&envoys, kind, list, item),
        );
        assert!(!theirs.is_empty(), "Envoy holds {kind}: {envoys:#}");
        assert_eq!(ours, theirs, "{kind}: Shoal's dump against Envoy's");
    }
    // `POD.NS` and one type.
    let pod = proxy.split('~').nth(2).expect("POD.NS").to_string();
    let clusters = proxy_config(&edges, &pod, &["--type", "cluster"]).await;
    assert!(
        clusters["@type"]
            .as_str()
            .unwrap()
            .ends_with("ClustersConfigDump"),
        "{clusters:#}"
    );
    let out = run_shoal(&["proxy-status", &proxy, "--edges", &edges]).await;
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    for kind in ["Clusters", "Listeners", "Routes", "Endpoints"] {
        assert!(shown.contains(&format!("{kind} Match")), "{shown}");
    }

    // A change Envoy rejects: it keeps its routes, and the dump shows those; the diff
    // shows the route it would not take.
    let before = latest_pushed(&served.admin).await;
    let vs = served.config_dir.join("routing/virtual-service.yaml");
    std::fs::write(&vs, virtual_service_envoy_rejects()).expect("edit");
    pushed_after(&served.admin, before).await;
    eventually("Envoy NACKs the routes", SYNC, || async {
        let states = type_states(&served.admin).await;
        states
            .iter()
            .any(|(_, s)| s["state"] == "NACKED")
            .then_some(())
    })
    .await;
    let ours = proxy_config(&edges, &proxy, &[]).await;
    let envoys = served.envoy_config_dump().await;
    let (kind, list, item) = KINDS[2];
    assert_eq!(
        resources(&ours, kind, list, item),
        resources(&envoys, kind, list, item),
        "after the NACK"
    );
    let out = run_shoal(&["proxy-status", &proxy, "--edges", &edges]).await;
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("Routes Don't Match"), "{shown}");
    assert!(
        shown.contains("(ACKed)") && shown.contains("(edge)"),
        "{shown}"
    );
    assert!(
        shown.contains("+") && shown.contains("omicron"),
        "the rejected regex: {shown}"
    );
    assert!(shown.contains("Clusters Match"), "{shown}");

    // A proxy no edge holds: exit 2, one line.
    let out = run_shoal(&[
        "proxy-config",
        "sidecar~10.9.9.9~x.y~y.svc.cluster.local",
        "--edges",
        &edges,
    ])
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("is not connected to any edge asked"),
        "{}",
        text(&out)
    );
    served.stop();
}

/// Per type: its `*ConfigDump`, the list in it, and where the resource sits in an item.
const KINDS: [(&str, &str, &[&str]); 3] = [
    (
        "ClustersConfigDump",
        "dynamic_active_clusters",
        &["cluster"],
    ),
    (
        "ListenersConfigDump",
        "dynamic_listeners",
        &["active_state", "listener"],
    ),
    (
        "RoutesConfigDump",
        "dynamic_route_configs",
        &["route_config"],
    ),
];

/// The resources of one type in a config dump, sorted by name.
fn resources(dump: &Value, kind: &str, list: &str, item: &[&str]) -> Vec<Value> {
    let configs = dump["configs"].as_array().expect("configs");
    let Some(typed) = configs.iter().find(|c| {
        c["@type"]
            .as_str()
            .is_some_and(|t| t.ends_with(&format!(".{kind}")))
    }) else {
        return Vec::new();
    };
    let mut out: Vec<Value> = typed[list]
        .as_array()
        .into_iter()
        .flatten()
        .map(|entry| item.iter().fold(entry, |v, k| &v[*k]).clone())
        .collect();
    out.sort_by_key(|r| r["name"].as_str().unwrap_or_default().to_string());
    out
}

/// `shoal proxy-config PROXY --edges EDGES ARGS`, as JSON.
async fn proxy_config(edges: &str, proxy: &str, args: &[&str]) -> Value {
    let mut all = vec!["proxy-config", proxy, "--edges", edges];
    all.extend(args);
    let out = run_shoal(&all).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    serde_json::from_slice(&out.stdout).expect("JSON")
}
