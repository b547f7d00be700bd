//! A proxy's config dump and diff through a real stream: what it ACKed is what the dump
//! shows (a NACKed response is not), and the diff names what the edge would send now.

use super::push_status_tests::{answer, response, settle, snapshot};
use super::tests::{open, server};
use super::*;
use crate::xds::types::CLUSTER;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use serde_json::Value;

const NODE_B: &str = "sidecar~10.0.0.2~w-1.b~b.svc.cluster.local";

/// The names of the outbound clusters of namespace b in a config dump.
fn dumped_services(dump: &Value) -> Vec<String> {
    let clusters = dump["configs"][0]["dynamic_active_clusters"]
        .as_array()
        .expect("a ClustersConfigDump");
    clusters
        .iter()
        .filter_map(|c| c["cluster"]["name"].as_str())
        .filter(|n| n.ends_with(".b.svc.cluster.local"))
        .map(|n| n.split('|').nth(3).unwrap_or(n).to_string())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn the_dump_shows_what_the_proxy_acked_and_the_diff_what_it_would_get_now() {
    let (s, snapshots) = server(XdsConfig::default(), (*snapshot(1, 1)).clone());
    let (inbound, out) = open(&s, NODE_B, CLUSTER).await;
    let mut out = out.unwrap();
    let first = response(&mut out).await;

    // Sent, not yet ACKed: the proxy runs nothing of it.
    settle().await;
    let dump = s.config_dump(NODE_B).unwrap();
    assert!(
        dump["configs"][0]["dynamic_active_clusters"]
            .as_array()
            .is_none_or(Vec::is_empty)
    );

    answer(&inbound, &first, None).await;
    settle().await;
    let dump = s.config_dump(NODE_B).unwrap();
    assert_eq!(dumped_services(&dump), ["s0.b.svc.cluster.local"]);
    assert_eq!(dump["configs"][0]["version_info"], "1");
    let diff = s.config_diff(NODE_B).unwrap();
    assert_eq!(diff["types"][0]["matches"], true, "{diff}");

    // A newer snapshot with one more service: the diff names it, on the edge's side.
    snapshots.send_replace(snapshot(2, 2));
    let diff = s.config_diff(NODE_B).unwrap();
    let cds = &diff["types"][0];
    assert_eq!(cds["matches"], false);
    assert_eq!(
        (cds["acked_version"].as_str(), cds["edge_version"].as_u64()),
        (Some("1"), Some(2))
    );
    let added: Vec<&Value> = cds["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["acked"].is_null())
        .collect();
    assert_eq!(added.len(), 1, "{cds}");
    assert_eq!(
        added[0]["edge"]["name"],
        "outbound|80||s1.b.svc.cluster.local"
    );

    // The proxy asks again (a new stream of the same proxy would too): sent s0 and s1,
    // NACKed: it still runs only s0.
    inbound
        .send(Ok(DiscoveryRequest {
            type_url: CLUSTER.into(),
            ..Default::default()
        }
        .into()))
        .await
        .unwrap();
    let second = response(&mut out).await;
    answer(&inbound, &second, Some("cluster s1: bad")).await;
    settle().await;
    let dump = s.config_dump(NODE_B).unwrap();
    assert_eq!(dumped_services(&dump), ["s0.b.svc.cluster.local"]);
    assert_eq!(s.config_diff(NODE_B).unwrap()["types"][0]["matches"], false);

    // Unknown proxies are named.
    let err = s
        .config_dump("sidecar~10.0.0.9~x.b~b.svc.cluster.local")
        .unwrap_err();
    assert!(err.to_string().contains("not connected"), "{err}");
    drop(inbound);
}
