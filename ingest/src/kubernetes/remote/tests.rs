//! Remote secrets through the whole ingest on the in-process twins, against two
//! `shoal-kube-test-server`s (test stand-ins for two clusters' API servers, not
//! Kubernetes) and the real kube-runtime watchers.

use super::{MULTICLUSTER_LABEL, RemoteClusters, RemoteClustersConfig};
use crate::kubernetes::{ClusterHealth, Clusters, KubeSource, KubeSourceConfig, SOURCE};
use crate::{Ingest, IngestConfig};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::config::{KubeConfigOptions, Kubeconfig};
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use shoal_infra::memory::{MemoryBus, MemoryConfigKv};
use shoal_infra::runtime::Drain;
use shoal_kube_test_server::TestApiServer;
use shoal_proto::config::{Config, Origin};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

fn remote_secret(cluster: &str, kubeconfig: &str) -> Value {
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("istio-remote-secret-{cluster}")),
            namespace: Some("istio-system".into()),
            labels: Some([(MULTICLUSTER_LABEL.to_string(), "true".to_string())].into()),
            ..Default::default()
        },
        data: Some(
            [(
                cluster.to_string(),
                ByteString(kubeconfig.as_bytes().to_vec()),
            )]
            .into(),
        ),
        ..Default::default()
    };
    let mut value = serde_json::to_value(secret).unwrap();
    value["apiVersion"] = json!("v1");
    value["kind"] = json!("Secret");
    value
}

fn service(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 9080}]},
    })
}

async fn client(server: &TestApiServer) -> kube::Client {
    let kubeconfig = Kubeconfig::from_yaml(&server.kubeconfig_yaml()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// The objects `owner` has in the KV, by `Kind ns/name`.
async fn objects(kv: &MemoryConfigKv, cluster: &str) -> BTreeMap<String, Config> {
    let owner = Origin::new(cluster, SOURCE, "");
    crate::testing::owned_objects(kv, &owner)
        .await
        .into_iter()
        .map(|(key, config)| (key.to_string(), config))
        .collect()
}

async fn wait_until<F: std::future::Future<Output = bool>>(what: &str, check: impl Fn() -> F) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn cluster_json(clusters: &Clusters, id: &str) -> Value {
    clusters.get(id).map(|h| h.to_json()).unwrap_or(Value::Null)
}

/// A remote secret adds cluster c2 under its own ID and network; an unreachable c2
/// keeps its objects (and shows unreachable); removing the secret removes them.
#[tokio::test]
async fn a_remote_secret_adds_and_removes_a_cluster() {
    shoal_infra::runtime::init_tracing();
    let primary = TestApiServer::start().await.unwrap();
    let remote = TestApiServer::start().await.unwrap();
    primary.create("services", service("ratings")).unwrap();
    remote
        .create(
            "namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": "istio-system", "labels": {"topology.istio.io/network": "net-2"}}}),
        )
        .unwrap();
    remote.create("services", service("reviews")).unwrap();

    let kv = Arc::new(MemoryConfigKv::default());
    let bus = Arc::new(MemoryBus::default());
    let config = IngestConfig::new("unused", "c1");
    let ingest = Ingest::new(
        config.clone(),
        kv.clone(),
        bus.clone(),
        &mut Registry::default(),
    );
    let handle = ingest.handle();
    let clusters = Clusters::default();
    let local = client(&primary).await;
    let remotes = RemoteClusters::new(
        local.clone(),
        RemoteClustersConfig {
            system_namespace: "istio-system".into(),
            ingest: config,
            source: KubeSourceConfig::default(),
            stop_grace: Duration::from_secs(5),
        },
        kv.clone(),
        bus,
        &ingest,
        clusters.clone(),
    );
    let health = ClusterHealth::new(
        "c1",
        "",
        "",
        handle.readiness(),
        handle.rejections().clone(),
    );
    let source = KubeSource::new(local, KubeSourceConfig::default()).with_health(health);
    let drain = Drain::new();
    let remotes_task = tokio::spawn(remotes.run(drain.watcher()));
    let watch = drain.watcher();
    let ingest_task = tokio::spawn(async move {
        ingest
            .run_source(source, tracing::info_span!("local"), watch)
            .await
    });
    wait_until("the local cluster", || async {
        objects(&kv, "c1")
            .await
            .contains_key("Service shop/ratings")
    })
    .await;

    // The secret names c2: its objects arrive under its ID, its pods on its network.
    primary
        .create("secrets", remote_secret("c2", &remote.kubeconfig_yaml()))
        .unwrap();
    wait_until("c2's service", || async {
        objects(&kv, "c2")
            .await
            .contains_key("Service shop/reviews")
    })
    .await;
    let reviews = &objects(&kv, "c2").await["Service shop/reviews"];
    assert_eq!(reviews.meta.origin.cluster, "c2");
    assert_eq!(reviews.meta.origin.network, "net-2");
    wait_until("c2 synced", || async {
        cluster_json(&clusters, "c2")["synced"] == true
    })
    .await;
    assert_eq!(cluster_json(&clusters, "c2")["network"], "net-2");

    // c2's API server goes away: its objects stay, and it shows unreachable.
    let restart = {
        let remote_addr = remote.url();
        tracing::info!(%remote_addr, "stopping c2's API server");
        let remote = Arc::new(remote);
        let restarting = remote.clone();
        (
            remote,
            tokio::spawn(async move { restarting.restart(Duration::from_secs(3)).await }),
        )
    };
    wait_until("c2 unreachable", || async {
        cluster_json(&clusters, "c2")["reachable"] == false
    })
    .await;
    assert!(
        objects(&kv, "c2")
            .await
            .contains_key("Service shop/reviews")
    );
    restart.1.await.unwrap().unwrap();
    restart.0.create("services", service("details")).unwrap();
    wait_until("c2 back, with what changed meanwhile", || async {
        objects(&kv, "c2")
            .await
            .contains_key("Service shop/details")
    })
    .await;
    assert_eq!(cluster_json(&clusters, "c2")["reachable"], true);

    // The secret removed: c2's objects leave the KV; c1's stay.
    primary
        .delete("secrets", "istio-system", "istio-remote-secret-c2")
        .unwrap();
    wait_until("c2's objects removed", || async {
        objects(&kv, "c2").await.is_empty()
    })
    .await;
    assert!(clusters.get("c2").is_none());
    assert!(
        objects(&kv, "c1")
            .await
            .contains_key("Service shop/ratings")
    );

    drain.signal();
    remotes_task.await.unwrap().unwrap();
    ingest_task.await.unwrap().unwrap();
}

#[test]
fn the_first_secret_naming_a_cluster_wins_and_the_local_cluster_is_never_remote() {
    let by_secret = BTreeMap::from([
        (
            "istio-system/a".to_string(),
            BTreeMap::from([
                ("c1".to_string(), "local".to_string()),
                ("c2".to_string(), "first".to_string()),
            ]),
        ),
        (
            "istio-system/b".to_string(),
            BTreeMap::from([("c2".to_string(), "second".to_string())]),
        ),
    ]);
    let desired = super::desired(&by_secret, "c1");
    assert_eq!(desired.len(), 1);
    assert_eq!(
        desired["c2"],
        ("istio-system/a".to_string(), "first".to_string())
    );
}
