use super::table::{Row, Synced, table};

fn synced(json: &str) -> Synced {
    serde_json::from_str(json).unwrap()
}

const ENTRY: &str = r#"{
  "proxy": "sidecar~10.0.0.1~reviews-v1-abc.shop~shop.svc.cluster.local",
  "namespace": "shop", "protocol": "sotw", "identity": null,
  "types": {
    "cds": {"state": "SYNCED", "version_sent": "12", "version_acked": "12"},
    "lds": {"state": "SYNCED", "version_sent": "12", "version_acked": "12"},
    "eds": {"state": "SYNCED", "version_sent": "14", "version_acked": "14"},
    "rds": {"state": "NACKED", "version_sent": "15", "version_acked": "12",
            "nack": {"nonce": "15-9", "version": "15", "message": "regex too large"}}
  }
}"#;

#[test]
fn a_row_has_istioctls_columns_and_the_newest_revision_acked() {
    let row = Row::new(synced(ENTRY), "edge-1", "127.0.0.1:15014");
    assert_eq!(row.name, "reviews-v1-abc.shop");
    assert_eq!((row.cds.as_str(), row.rds.as_str()), ("SYNCED", "NACKED"));
    assert_eq!(row.revision, Some(14));
    assert!(!row.synced());
    let text = table(std::slice::from_ref(&row));
    assert!(text.starts_with("NAME "), "{text}");
    assert!(text.contains("reviews-v1-abc.shop"), "{text}");
    assert!(text.contains("edge-1"), "{text}");
    let detail = super::table::detail(&row);
    assert!(detail.contains("rejected 15: regex too large"), "{detail}");
}

#[test]
fn a_type_never_sent_shows_as_istioctl_shows_it() {
    let row = Row::new(
        synced(
            r#"{"proxy": "router~10.0.0.2~gw-1.istio-system~istio-system.svc.cluster.local",
                   "types": {"cds": {"state": "NOT_SENT"}}}"#,
        ),
        "edge-0",
        "127.0.0.1:15014",
    );
    assert_eq!(
        (row.cds.as_str(), row.rds.as_str()),
        ("NOT SENT", "NOT SENT")
    );
    assert_eq!(row.revision, None);
    assert!(row.synced());
}

#[test]
fn a_diff_reads_as_istioctls() {
    let diff: super::diff::ConfigDiff = serde_json::from_str(
        r#"{"proxy": "p", "edge": "edge-0", "types": [
        {"type_url": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
         "acked_version": "7", "edge_version": 7, "matches": true, "resources": []},
        {"type_url": "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
         "acked_version": "7", "edge_version": 9, "matches": false, "resources": [
            {"name": "80", "acked": {"name": "80", "timeout": "5s"},
                           "edge": {"name": "80", "timeout": "7s"}},
            {"name": "9080", "acked": null, "edge": {"name": "9080"}}]}]}"#,
    )
    .unwrap();
    let text = super::diff::render(&diff);
    assert!(text.starts_with("Clusters Match\n"), "{text}");
    assert!(
        text.contains("Routes Don't Match (ACKed version 7, the edge at 9)"),
        "{text}"
    );
    assert!(text.contains("--- 80 (ACKed)\n+++ 80 (edge)"), "{text}");
    assert!(text.contains("-  \"timeout\": \"5s\""), "{text}");
    assert!(text.contains("+  \"timeout\": \"7s\""), "{text}");
    assert!(text.contains("+++ 9080 (edge)"), "{text}");
}
