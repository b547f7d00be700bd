//! CSDS on the all-in-one's plaintext xDS port, asked by a real `grpcio` client
//! (`csds_client.py`, messages from PyPI's `xds-protos`) about a real Envoy: every type
//! SYNCED and ACKED, then the routes in ERROR with Envoy's own words once it NACKs them.
//!
//! Python comes from `.venv/bin/python` (`make setup` installs `grpcio` and `xds-protos`
//! from `deploy/requirements-test.txt`) or `SHOAL_PYTHON`.

use crate::served::{SYNC, Served, eventually, type_states, virtual_service_envoy_rejects};
use crate::support::{mesh, tool, workspace_root};
use serde_json::Value;
use std::time::Instant;

const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpcio_client_reads_a_real_envoys_sync_state_over_csds() {
    let served = Served::start().await;
    let node_id = format!(
        "sidecar~127.0.0.1~productpage.{ns}~{ns}.svc.cluster.local",
        ns = mesh::NAMESPACE
    );

    let asked = Instant::now();
    let answers = ask_csds(served.xds, &node_id);
    println!(
        "grpcio client answered in {:.2}s",
        asked.elapsed().as_secs_f64()
    );
    // FetchClientStatus: the one proxy, every type it watches synced and ACKed.
    let configs = answers["fetch"]["config"].as_array().expect("config");
    assert_eq!(configs.len(), 1, "{answers:#}");
    let envoy_config = &configs[0];
    assert_eq!(envoy_config["node"]["id"], node_id.as_str());
    assert_eq!(
        envoy_config["node"]["metadata"]["NAMESPACE"],
        mesh::NAMESPACE
    );
    let types = envoy_config["generic_xds_configs"]
        .as_array()
        .expect("types");
    let type_urls: Vec<&str> = types
        .iter()
        .filter_map(|t| t["type_url"].as_str())
        .collect();
    for short in [
        "Cluster",
        "ClusterLoadAssignment",
        "Listener",
        "RouteConfiguration",
    ] {
        assert!(
            type_urls.iter().any(|t| t.ends_with(&format!(".{short}"))),
            "{short} in {type_urls:?}"
        );
    }
    for t in types {
        assert_eq!(t["config_status"], "SYNCED", "{t:#}");
        assert_eq!(t["client_status"], "ACKED", "{t:#}");
        assert!(
            t["version_info"].as_str().is_some_and(|v| !v.is_empty()),
            "{t:#}"
        );
        assert!(
            t.get("error_state").is_none() && t.get("xds_config").is_none(),
            "{t:#}"
        );
    }
    // StreamClientStatus: one answer per request; a matcher of no proxy answers none.
    let streamed = answers["stream"].as_array().expect("stream");
    assert_eq!(streamed.len(), 2, "{answers:#}");
    assert_eq!(streamed[0]["config"][0]["node"]["id"], node_id.as_str());
    assert_eq!(streamed[0]["config"].as_array().map(Vec::len), Some(1));
    assert!(
        streamed[1].get("config").is_none(),
        "no proxy: {:#}",
        streamed[1]
    );

    // Envoy rejects the routes: RDS is in ERROR, with the rejected version and Envoy's
    // own message.
    let vs = served.config_dir.join("routing/virtual-service.yaml");
    std::fs::write(vs, virtual_service_envoy_rejects()).expect("edit");
    let admin = served.admin.as_str();
    eventually("Envoy NACKs the routes", SYNC, || async move {
        let states = type_states(admin).await;
        let rds = states.iter().find(|(t, _)| t == "rds")?;
        (rds.1["state"] == "NACKED").then_some(())
    })
    .await;
    let answers = ask_csds(served.xds, &node_id);
    let types = answers["fetch"]["config"][0]["generic_xds_configs"]
        .as_array()
        .expect("types");
    let rds = types.iter().find(|t| t["type_url"] == RDS).expect("RDS");
    assert_eq!(rds["config_status"], "ERROR", "{rds:#}");
    assert_eq!(rds["client_status"], "NACKED", "{rds:#}");
    let error = &rds["error_state"];
    let details = error["details"].as_str().unwrap_or_default();
    assert!(details.contains("program size"), "Envoy's error: {rds:#}");
    assert_eq!(error["version_info"], rds["version_info"], "{rds:#}");
    for t in types.iter().filter(|t| t["type_url"] != RDS) {
        assert_eq!(
            t["config_status"], "SYNCED",
            "only the routes are rejected: {t:#}"
        );
    }

    served.stop();
}

/// Runs `csds_client.py` against the plaintext xDS port `xds`; its JSON.
fn ask_csds(xds: u16, node_id: &str) -> Value {
    let script = workspace_root().join("tests/monitoring/csds_client.py");
    let out = std::process::Command::new(tool("python", "SHOAL_PYTHON"))
        .arg(&script)
        .arg(format!("127.0.0.1:{xds}"))
        .arg(node_id)
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "csds_client.py failed ({}):\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}
