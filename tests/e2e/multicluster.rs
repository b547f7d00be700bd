//! Two clusters federated into one mesh, end to end: two `shoal-kube-test-server`s (test
//! stand-ins for two clusters' API servers, not Kubernetes), builder and edge on real NATS
//! and Redis, and a real Envoy on network `net-1` in `us-east/a`.
//!
//! `reviews` exists in both clusters. Cluster 1's pod (net-1, us-east) is reached at its
//! own address; cluster 2's (net-2, eu-west) has a pod IP nobody on net-1 can reach, so it
//! must be reached through net-2's east-west gateway (a backend standing in for it).
//!
//! 1. One ingest per cluster (cluster 1's network given by `--network`, cluster 2's read
//!    from its system namespace): Envoy's traffic reaches both clusters, cluster 2's
//!    through the gateway; with outlier detection, all of it stays in Envoy's own locality.
//! 2. Cluster 2's ingest stops: its endpoints stay served. A remote secret on cluster 1
//!    hands cluster 2 to cluster 1's ingest; deleting the secret removes its endpoints.

use crate::support::backend;
use crate::support::envoy::{Envoy, XdsApi, bootstrap};
use crate::support::free_port;
use crate::support::process::wait_http_ok;
use crate::support::tiers;
use serde_json::{Value, json};
use shoal_infra::testing::{NatsServer, RedisServer};
use shoal_kube_test_server::TestApiServer;
use std::time::{Duration, Instant};

const HOST: &str = "reviews.bookinfo.svc.cluster.local";
const DESTINATION_RULES: &str = "destinationrules.networking.istio.io";

fn node(name: &str, region: &str, zone: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": zone}}})
}

/// `reviews` in `cluster`: the Service, one Pod on `node_name` at `pod_ip` (with a
/// sidecar, as only those are reached across networks), and its EndpointSlice serving
/// port `target`.
fn reviews(api: &TestApiServer, service_port: u16, node_name: &str, pod_ip: &str, target: u16) {
    let objects = [
        (
            "namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bookinfo"}}),
        ),
        (
            "services",
            json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "reviews", "namespace": "bookinfo"},
                "spec": {"selector": {"app": "reviews"}, "clusterIP": "10.96.0.10",
                         "ports": [{"name": "http", "port": service_port}]}}),
        ),
        (
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "reviews-1", "namespace": "bookinfo", "labels": {
                    "app": "reviews", "security.istio.io/tlsMode": "istio"}},
                "spec": {"nodeName": node_name, "containers": [{"name": "app"}]},
                "status": {"podIP": pod_ip, "conditions": [{"type": "Ready", "status": "True"}]}}),
        ),
        (
            "endpointslices.discovery.k8s.io",
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": "reviews-1", "namespace": "bookinfo",
                             "labels": {"kubernetes.io/service-name": "reviews"}},
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": target}],
                "endpoints": [{"addresses": [pod_ip], "conditions": {"ready": true},
                               "targetRef": {"kind": "Pod", "name": "reviews-1", "namespace": "bookinfo"}}]}),
        ),
    ];
    for (resource, object) in objects {
        api.apply(resource, object).expect("create");
    }
}

/// A sidecar in `bookinfo` on network `net-1`, in locality `us-east/a`.
fn start_envoy(xds: u16, dir: &std::path::Path) -> Envoy {
    let admin = free_port();
    let yaml = bootstrap(
        XdsApi::Sotw,
        "127.0.0.1",
        "bookinfo",
        "productpage",
        &[xds],
        admin,
    )
    .replacen(
        "  metadata:\n",
        "  locality: {region: us-east, zone: a}\n  metadata:\n    NETWORK: net-1\n",
        1,
    );
    Envoy::start("envoy", &yaml, admin, dir)
}

async fn get(client: &reqwest::Client, port: u16) -> Result<String, String> {
    let resp = client
        .get(format!("http://127.0.0.1:{port}/reviews"))
        .header("host", HOST)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status();
    let body = resp.text().await.map_err(|e| e.to_string())?;
    status
        .is_success()
        .then_some(body.clone())
        .ok_or(format!("{status}: {body}"))
}

/// Which backends answer `n` requests, by name; any failed request fails the test.
async fn answers(client: &reqwest::Client, port: u16, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        match get(client, port).await {
            Ok(body) => out.push(body),
            Err(e) => panic!("a request failed: {e}"),
        }
    }
    out
}

/// The `(address:port, priority)` of every host of the `reviews` cluster, from Envoy.
async fn reviews_hosts(envoy: &Envoy, service_port: u16) -> Vec<(String, u64)> {
    let name = format!("outbound|{service_port}||{HOST}");
    let Ok(resp) = reqwest::get(envoy.admin("/clusters?format=json")).await else {
        return Vec::new();
    };
    let body: Value = resp.json().await.unwrap_or_default();
    let clusters = body["cluster_statuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some(cluster) = clusters.iter().find(|c| c["name"] == name.as_str()) else {
        return Vec::new();
    };
    let mut hosts: Vec<(String, u64)> = cluster["host_statuses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| {
            let sa = &h["address"]["socket_address"];
            (
                format!(
                    "{}:{}",
                    sa["address"].as_str().unwrap_or(""),
                    sa["port_value"]
                ),
                h["priority"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    hosts.sort();
    hosts
}

async fn wait_for<F: std::future::Future<Output = bool>>(what: &str, check: impl Fn() -> F) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_federate_across_networks_and_localities() {
    let _serial = crate::SERIAL.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let local = backend::start("cluster-1", "127.0.0.1").await;
    let gateway = backend::start("net-2-gateway", "127.0.0.1").await;
    let service_port = free_port();

    let api1 = TestApiServer::start().await.expect("API server 1");
    api1.apply("nodes", node("node-1", "us-east", "a")).unwrap();
    reviews(
        &api1,
        service_port,
        "node-1",
        "127.0.0.1",
        local.addr.port(),
    );
    let api2 = TestApiServer::start().await.expect("API server 2");
    api2.apply("nodes", node("node-2", "eu-west", "b")).unwrap();
    // A pod IP on net-2: unreachable from net-1 (requests to it would fail).
    reviews(&api2, service_port, "node-2", "10.255.0.1", 9080);
    api2.apply(
        "namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "istio-system",
            "labels": {"topology.istio.io/network": "net-2"}}}),
    )
    .unwrap();
    api2.apply(
        "services",
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "istio-eastwestgateway", "namespace": "istio-system", "labels": {
                "topology.istio.io/network": "net-2",
                "networking.istio.io/gatewayPort": gateway.addr.port().to_string()}},
            "spec": {"type": "LoadBalancer", "ports": [{"name": "tls", "port": 15443}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]}}}),
    )
    .unwrap();
    let (dir1, dir2) = (dir.path().join("c1"), dir.path().join("c2"));
    std::fs::create_dir_all(&dir1)
        .and_then(|()| std::fs::create_dir_all(&dir2))
        .expect("dirs");
    let kubeconfig1 = api1.kubeconfig(&dir1).expect("kubeconfig");
    let kubeconfig2 = api2.kubeconfig(&dir2).expect("kubeconfig");

    let (nats, redis) = (NatsServer::start(), RedisServer::start());
    let source = |kubeconfig: &std::path::Path| -> Vec<String> {
        ["--registry", "kubernetes", "--kubeconfig"]
            .iter()
            .map(|s| s.to_string())
            .chain([kubeconfig.display().to_string()])
            .collect()
    };
    let mut args1 = source(&kubeconfig1);
    args1.extend(["--network".into(), "net-1".into()]);
    let mut args2 = source(&kubeconfig2);
    args2.extend(["--network".into(), "net-2".into()]);
    let mut ingest1 = tiers::ingest_of("cluster-1", &refs(&args1), &nats.url(), dir.path());
    let mut ingest2 = tiers::ingest_of("cluster-2", &refs(&args2), &nats.url(), dir.path());
    let mut builder = tiers::builder(1, &nats.url(), &redis.url(), dir.path());
    let mut edge = tiers::edge(1, &nats.url(), &redis.url(), &[], dir.path());
    for (name, port) in [
        ("ingest-1", ingest1.http),
        ("ingest-2", ingest2.http),
        ("builder", builder.http),
        ("edge", edge.http),
    ] {
        let url = format!("http://127.0.0.1:{port}/healthz/ready");
        assert!(
            wait_http_ok(&url, Duration::from_secs(30)).await,
            "{name} not ready"
        );
    }
    let envoy = start_envoy(edge.xds, dir.path());
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");

    // 1. Both clusters' endpoints: cluster 1's pod directly, cluster 2's through the
    // gateway (its pod IP never), all at priority 0 without outlier detection.
    let local_host = format!("127.0.0.1:{}", local.addr.port());
    let gateway_host = format!("127.0.0.1:{}", gateway.addr.port());
    wait_for("both clusters in Envoy", || async {
        reviews_hosts(&envoy, service_port).await.len() == 2
    })
    .await;
    let hosts = reviews_hosts(&envoy, service_port).await;
    let mut expected = vec![(local_host.clone(), 0), (gateway_host.clone(), 0)];
    expected.sort();
    assert_eq!(
        hosts, expected,
        "cluster 2's pod IP must not be sent to net-1"
    );
    let seen = answers(&client, service_port, 60).await;
    let through_gateway = seen.iter().filter(|b| *b == "net-2-gateway").count();
    assert!(
        (10..=50).contains(&through_gateway),
        "both clusters serve: {through_gateway}/60 through net-2's gateway"
    );

    // With outlier detection, localities fail over: Envoy's own (us-east/a) first.
    api1.apply(
        DESTINATION_RULES,
        json!({"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": "reviews", "namespace": "bookinfo"},
            "spec": {"host": HOST, "trafficPolicy": {"outlierDetection": {
                "consecutive5xxErrors": 5, "interval": "10s", "baseEjectionTime": "30s"}}}}),
    )
    .unwrap();
    wait_for("the gateway at a lower priority", || async {
        reviews_hosts(&envoy, service_port)
            .await
            .contains(&(gateway_host.clone(), 1))
    })
    .await;
    let seen = answers(&client, service_port, 30).await;
    assert!(seen.iter().all(|b| b == "cluster-1"), "{seen:?}");

    // 2. Cluster 2's ingest stops: nothing is deleted, its endpoints stay.
    ingest2.proc.stop(Duration::from_secs(5));
    // A remote secret on cluster 1 hands cluster 2 to cluster 1's ingest.
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "istio-remote-secret-cluster-2", "namespace": "istio-system",
                     "labels": {"istio/multiCluster": "true"}},
        "data": {"cluster-2": base64(&api2.kubeconfig_yaml())}});
    api1.apply("secrets", secret).unwrap();
    let secret_written = Instant::now();
    let clusters_url = format!("http://127.0.0.1:{}/debug/clusters", ingest1.http);
    wait_for("cluster-2 followed by cluster 1's ingest", || async {
        let Ok(resp) = reqwest::get(&clusters_url).await else {
            return false;
        };
        let clusters: Value = resp.json().await.unwrap_or_default();
        clusters
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["cluster"] == "cluster-2" && c["synced"] == true && c["network"] == "net-2")
    })
    .await;
    let followed = secret_written.elapsed();
    assert!(
        reviews_hosts(&envoy, service_port)
            .await
            .contains(&(gateway_host.clone(), 1)),
        "cluster 2's endpoints stayed through the hand-over"
    );

    // Deleting the secret removes cluster 2's endpoints.
    api1.delete("secrets", "istio-system", "istio-remote-secret-cluster-2")
        .unwrap();
    let secret_deleted = Instant::now();
    wait_for("cluster 2's endpoints removed", || async {
        reviews_hosts(&envoy, service_port).await == [(local_host.clone(), 0)]
    })
    .await;
    println!(
        "e2e multicluster: remote secret written → cluster synced in {} ms; secret deleted → \
         its endpoints gone from Envoy in {} ms",
        followed.as_millis(),
        secret_deleted.elapsed().as_millis()
    );
    let seen = answers(&client, service_port, 20).await;
    assert!(seen.iter().all(|b| b == "cluster-1"), "{seen:?}");

    for tier in [&mut ingest1.proc, &mut builder.proc, &mut edge.proc] {
        tier.assert_running();
        tier.stop(Duration::from_secs(5));
    }
}

/// A Secret `data` value: base64, as k8s-openapi encodes it.
fn base64(text: &str) -> Value {
    serde_json::to_value(k8s_openapi::ByteString(text.as_bytes().to_vec())).expect("encodes")
}

fn refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}
