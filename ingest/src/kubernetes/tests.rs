//! The Kubernetes registry through the whole ingest (KV writer, debouncer) on the
//! in-process twins, against `shoal-kube-test-server` (a test stand-in for the API
//! server, not Kubernetes) and the real kube-runtime watchers.

use super::{KubeSource, KubeSourceConfig, SOURCE};
use crate::{Ingest, IngestConfig};
use kube::config::{KubeConfigOptions, Kubeconfig};
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use shoal_infra::memory::{MemoryBus, MemoryConfigKv};
use shoal_infra::runtime::Drain;
use shoal_kube_test_server::{Settings, TestApiServer};
use shoal_proto::config::{Config, Kind, Origin, Spec};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

const CLUSTER: &str = "c1";
const VS: &str = "virtualservices.networking.istio.io";

fn service(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 9080}]},
    })
}

fn virtual_service(name: &str, timeout: &str) -> Value {
    json!({
        "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"hosts": [name], "http": [{"route": [{"destination": {"host": name}}], "timeout": timeout}]},
    })
}

fn zero_weights(name: &str) -> Value {
    json!({
        "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"hosts": [name], "http": [{"route": [
            {"destination": {"host": name, "subset": "v1"}, "weight": 0},
            {"destination": {"host": name, "subset": "v2"}, "weight": 0},
        ]}]},
    })
}

struct Env {
    server: TestApiServer,
    kv: Arc<MemoryConfigKv>,
    handle: crate::IngestHandle,
    drain: Drain,
    task: tokio::task::JoinHandle<Result<(), crate::IngestError>>,
}

impl Env {
    async fn start(server: TestApiServer) -> Env {
        Self::start_with(server, KubeSourceConfig::default()).await
    }

    async fn start_with(server: TestApiServer, source_config: KubeSourceConfig) -> Env {
        shoal_infra::runtime::init_tracing();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = Kubeconfig::read_from(server.kubeconfig(dir.path()).unwrap()).unwrap();
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let kv = Arc::new(MemoryConfigKv::default());
        let bus = Arc::new(MemoryBus::default());
        let ingest = Ingest::new(
            IngestConfig::new("unused", CLUSTER),
            kv.clone(),
            bus,
            &mut Registry::default(),
        );
        let handle = ingest.handle();
        let drain = Drain::new();
        let source = KubeSource::new(client, source_config);
        let watch = drain.watcher();
        let task = tokio::spawn(async move {
            ingest
                .run_source(source, tracing::info_span!("kubernetes"), watch)
                .await
        });
        Env {
            server,
            kv,
            handle,
            drain,
            task,
        }
    }

    /// The Kubernetes source's objects in the KV, by `Kind ns/name`.
    async fn objects(&self) -> BTreeMap<String, Config> {
        let owner = Origin::new(CLUSTER, SOURCE, "");
        crate::testing::owned_objects(&*self.kv, &owner)
            .await
            .into_iter()
            .map(|(key, config)| (key.to_string(), config))
            .collect()
    }

    async fn wait_for(&self, what: &str, check: impl Fn(&BTreeMap<String, Config>) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let objects = self.objects().await;
            if check(&objects) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {:?}",
                objects.keys().collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn stop(self) {
        self.drain.signal();
        self.task.await.unwrap().unwrap();
    }
}

fn timeout_of(config: &Config) -> String {
    match &config.spec {
        shoal_proto::config::Spec::VirtualService(vs) => format!("{:?}", vs.http[0].timeout),
        other => panic!("not a VirtualService: {other:?}"),
    }
}

#[tokio::test]
async fn objects_from_the_api_reach_the_kv_with_their_origin_and_follow_every_change() {
    let server = TestApiServer::start_with(Settings {
        bookmark_interval: Duration::from_millis(100),
        ..Settings::default()
    })
    .await
    .unwrap();
    server.create("services", service("reviews")).unwrap();
    server.create(VS, virtual_service("reviews", "5s")).unwrap();
    server.create(VS, zero_weights("broken")).unwrap();
    let env = Env::start(server).await;
    let ready = Instant::now();
    while !env.handle.is_ready() {
        assert!(ready.elapsed() < Duration::from_secs(10), "never ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Listed: valid objects in the KV with their origin; the invalid one rejected by name.
    let objects = env.objects().await;
    assert!(objects.contains_key("Service shop/reviews"), "{objects:?}");
    assert!(objects.contains_key("VirtualService shop/reviews"));
    assert!(!objects.contains_key("VirtualService shop/broken"));
    let origin = &objects["Service shop/reviews"].meta.origin;
    assert_eq!(
        (origin.cluster.as_str(), origin.source.as_str()),
        (CLUSTER, SOURCE)
    );
    let rejections = env.handle.rejections().list();
    assert_eq!(rejections.len(), 1, "{rejections:?}");
    assert_eq!(rejections[0].object, "VirtualService shop/broken");
    assert_eq!(rejections[0].file, "kubernetes/c1");
    assert!(rejections[0].reason.contains("weight"), "{rejections:?}");

    // Live changes: an edit, a new object, a delete; an invalid edit keeps the valid one.
    env.server
        .apply(VS, virtual_service("reviews", "7s"))
        .unwrap();
    env.server.create("services", service("ratings")).unwrap();
    env.server.delete(VS, "shop", "broken").unwrap();
    env.wait_for("the edit and the new service", |o| {
        o.get("VirtualService shop/reviews")
            .is_some_and(|vs| timeout_of(vs).contains("7s"))
            && o.contains_key("Service shop/ratings")
    })
    .await;
    assert!(env.handle.rejections().list().is_empty());
    env.server.apply(VS, zero_weights("reviews")).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let objects = env.objects().await;
    assert!(timeout_of(&objects["VirtualService shop/reviews"]).contains("7s"));
    assert_eq!(env.handle.rejections().list().len(), 1);

    // Watches dropped: what changed meanwhile arrives once.
    env.server.drop_watches();
    env.server.delete("services", "shop", "ratings").unwrap();
    env.server
        .apply(VS, virtual_service("reviews", "9s"))
        .unwrap();
    env.wait_for("the changes made while the watches were down", |o| {
        !o.contains_key("Service shop/ratings")
            && o.get("VirtualService shop/reviews")
                .is_some_and(|vs| timeout_of(vs).contains("9s"))
    })
    .await;

    // History compacted while watches are down: 410, relist, and what the relist lacks
    // is deleted.
    // The relist's items (a Service's without apiVersion/kind, as kube-apiserver lists
    // them) are typed by their watch: none is rejected.
    env.server.create("services", service("details")).unwrap();
    env.server.delete("services", "shop", "reviews").unwrap();
    env.server.compact();
    env.server.drop_watches();
    env.server.apply("services", service("details")).unwrap();
    env.wait_for("the relist after 410", |o| {
        !o.contains_key("Service shop/reviews") && o.contains_key("Service shop/details")
    })
    .await;
    assert!(
        env.objects()
            .await
            .contains_key("VirtualService shop/reviews")
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rejections = env.handle.rejections().list();
    assert!(rejections.is_empty(), "{rejections:?}");
    assert!(env.handle.is_ready());
    env.stop().await;
}

/// Against a server that answers empty lists `"items": null` (kube-rs#1492), every
/// watch still lists, and the source syncs with what there is.
#[tokio::test]
async fn empty_lists_with_null_items_are_empty() {
    let server = TestApiServer::start_with(Settings {
        null_empty_lists: true,
        ..Settings::default()
    })
    .await
    .unwrap();
    server.create("services", service("reviews")).unwrap();
    let env = Env::start(server).await;
    env.wait_for("the listed service", |o| {
        o.contains_key("Service shop/reviews")
    })
    .await;
    assert!(env.handle.is_ready());
    assert!(env.handle.rejections().list().is_empty());
    env.stop().await;
}

#[tokio::test]
async fn accepted_objects_warnings_follow_the_api() {
    let server = TestApiServer::start().await.unwrap();
    let mut ignored = virtual_service("reviews", "5s");
    ignored["spec"]["http"][0]["mirrorPolicy"] = json!({});
    server.create(VS, ignored.clone()).unwrap();
    let env = Env::start(server).await;
    env.wait_for("the VirtualService", |o| {
        o.contains_key("VirtualService shop/reviews")
    })
    .await;
    let warnings = env.handle.warnings().list();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].file, "kubernetes/c1");
    assert_eq!(warnings[0].object, "VirtualService shop/reviews");
    assert!(warnings[0].warning.contains("spec.http[0].mirrorPolicy"));

    // Fixed: gone; back, then deleted: gone again.
    env.server
        .apply(VS, virtual_service("reviews", "7s"))
        .unwrap();
    env.wait_for("the edit", |o| {
        o.get("VirtualService shop/reviews")
            .is_some_and(|vs| timeout_of(vs).contains("7s"))
    })
    .await;
    assert!(env.handle.warnings().list().is_empty());
    env.server.apply(VS, ignored).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while env.handle.warnings().list().is_empty() {
        assert!(Instant::now() < deadline, "the warning never came back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    env.server.delete(VS, "shop", "reviews").unwrap();
    env.wait_for("the delete", |o| {
        !o.contains_key("VirtualService shop/reviews")
    })
    .await;
    assert!(env.handle.warnings().list().is_empty());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_policies_on_the_api_server_are_config_and_an_invalid_one_is_reported() {
    const AP: &str = "authorizationpolicies.security.istio.io";
    const PA: &str = "peerauthentications.security.istio.io";
    const RA: &str = "requestauthentications.security.istio.io";
    let server = TestApiServer::start().await.unwrap();
    let policy = json!({
        "apiVersion": "security.istio.io/v1",
        "kind": "AuthorizationPolicy",
        "metadata": {"name": "deny-admin", "namespace": "shop"},
        "spec": {"action": "DENY", "rules": [{"to": [{"operation": {"paths": ["/admin"], "ports": ["8080"]}}]}]}
    });
    server.create(AP, policy).unwrap();
    // The API server writes port keys as strings.
    let peer = json!({
        "apiVersion": "security.istio.io/v1",
        "kind": "PeerAuthentication",
        "metadata": {"name": "db", "namespace": "shop"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}, "mtls": {"mode": "STRICT"},
                 "portLevelMtls": {"9102": {"mode": "PERMISSIVE"}}}
    });
    server.create(PA, peer).unwrap();
    // Valid: config like the others.
    let jwt = json!({
        "apiVersion": "security.istio.io/v1",
        "kind": "RequestAuthentication",
        "metadata": {"name": "jwt", "namespace": "shop"},
        "spec": {"jwtRules": [{"issuer": "https://accounts.example.com", "jwksUri": "https://accounts.example.com/jwks"}]}
    });
    server.create(RA, jwt).unwrap();
    // Invalid (neither issuer nor jwksUri): reported for what is wrong with it.
    let broken = json!({
        "apiVersion": "security.istio.io/v1",
        "kind": "RequestAuthentication",
        "metadata": {"name": "broken", "namespace": "shop"},
        "spec": {"jwtRules": [{"audiences": ["a"]}]}
    });
    server.create(RA, broken).unwrap();
    let env = Env::start(server).await;
    env.wait_for("the enforced policies", |o| {
        o.contains_key("AuthorizationPolicy shop/deny-admin")
            && o.contains_key("PeerAuthentication shop/db")
            && o.contains_key("RequestAuthentication shop/jwt")
    })
    .await;
    let Spec::PeerAuthentication(pa) = &env.objects().await["PeerAuthentication shop/db"].spec
    else {
        panic!("not a PeerAuthentication")
    };
    assert_eq!(
        pa.port_level_mtls["9102"].mode.as_deref(),
        Some("PERMISSIVE")
    );
    let reported = |env: &Env| env.handle.rejections().list();
    let deadline = Instant::now() + Duration::from_secs(10);
    while reported(&env).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the invalid RequestAuthentication was never reported: {:?}",
            reported(&env)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let by_object: BTreeMap<String, _> = reported(&env)
        .into_iter()
        .map(|r| (r.object.clone(), r))
        .collect();
    assert!(!by_object.contains_key("RequestAuthentication shop/jwt"));
    let invalid = &by_object["RequestAuthentication shop/broken"];
    assert!(
        invalid
            .reason
            .starts_with("spec.jwtRules[0].issuer: issuer or jwksUri must be set"),
        "{invalid:?}"
    );
    assert!(
        !env.objects()
            .await
            .contains_key("RequestAuthentication shop/broken")
    );
    // Deleted: gone from the KV, no longer reported.
    env.server.delete(AP, "shop", "deny-admin").unwrap();
    env.server.delete(PA, "shop", "db").unwrap();
    env.server.delete(RA, "shop", "jwt").unwrap();
    env.server.delete(RA, "shop", "broken").unwrap();
    env.wait_for("the deletes", |o| {
        !o.contains_key("AuthorizationPolicy shop/deny-admin")
            && !o.contains_key("PeerAuthentication shop/db")
            && !o.contains_key("RequestAuthentication shop/jwt")
    })
    .await;
    while !reported(&env).is_empty() {
        assert!(
            Instant::now() < deadline + Duration::from_secs(10),
            "still reported: {:?}",
            reported(&env)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_kinds_on_the_api_server_are_reported_while_they_exist() {
    const EF: &str = "envoyfilters.networking.istio.io";
    let server = TestApiServer::start().await.unwrap();
    // Istio's CRD, which the stand-in does not serve by default.
    server.register(shoal_kube_test_server::ResourceType::grouped(
        "networking.istio.io",
        &["v1alpha3"],
        "envoyfilters",
        "EnvoyFilter",
        true,
    ));
    let filter = json!({
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "EnvoyFilter",
        "metadata": {"name": "ef", "namespace": "shop"},
        "spec": {"configPatches": []}
    });
    server.create(EF, filter).unwrap();
    server.create(VS, virtual_service("reviews", "5s")).unwrap();
    let env = Env::start(server).await;
    env.wait_for("the VirtualService", |o| {
        o.contains_key("VirtualService shop/reviews")
    })
    .await;
    let reported = |env: &Env| env.handle.rejections().list();
    let deadline = Instant::now() + Duration::from_secs(10);
    while reported(&env).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the EnvoyFilter was never reported"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rejection = &reported(&env)[0];
    assert_eq!(
        (rejection.kind, rejection.object.as_str()),
        ("other", "EnvoyFilter shop/ef")
    );
    assert_eq!(
        rejection.reason,
        "unsupported by Shoal, ignored: networking.istio.io/v1alpha3 EnvoyFilter (it has no effect)"
    );
    env.server.delete(EF, "shop", "ef").unwrap();
    while !reported(&env).is_empty() {
        assert!(
            Instant::now() < deadline + Duration::from_secs(10),
            "still reported"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    env.stop().await;
}

#[test]
fn kind_keys_of_watched_objects() {
    assert!(super::WATCHED.iter().any(|w| w.kind == "EndpointSlice"));
    assert_eq!(Kind::from_api("v1", "Service"), Some(Kind::Service));
}

/// A cluster without Istio's CRDs: those kinds are not watched, and the source still
/// syncs and serves the rest.
#[tokio::test]
async fn kinds_the_server_does_not_serve_are_skipped() {
    use shoal_kube_test_server::ResourceType;
    let mut registry = shoal_kube_test_server::resource::Registry::default();
    registry.register(ResourceType::core("namespaces", "Namespace", false));
    registry.register(ResourceType::core("services", "Service", true));
    registry.register(ResourceType::core("pods", "Pod", true));
    let server = TestApiServer::start_with(Settings {
        registry,
        ..Settings::default()
    })
    .await
    .unwrap();
    server.create("services", service("reviews")).unwrap();
    let env = Env::start(server).await;
    env.wait_for("the service", |o| o.contains_key("Service shop/reviews"))
        .await;
    assert!(env.handle.is_ready());
    env.stop().await;
}

fn node(name: &str, region: &str, zone: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": zone,
        }},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    })
}

fn pod_on(name: &str, node: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": "reviews"}},
        "spec": {"nodeName": node, "containers": [{"name": "app"}]},
        "status": {"podIP": "10.0.0.1", "phase": "Running",
                   "conditions": [{"type": "Ready", "status": "True"}]},
    })
}

fn node_locality(objects: &BTreeMap<String, Config>, pod: &str) -> Option<String> {
    match &objects.get(pod)?.spec {
        shoal_proto::config::Spec::Pod(p) => Some(p.node_locality.clone()),
        _ => None,
    }
}

/// Pods carry their Node's `region/zone` (Nodes themselves are not config: they never
/// reach the KV), and follow it when the Node is relabelled; a Pod listed before its
/// Node gets the locality once the Node arrives.
#[tokio::test]
async fn pods_carry_their_node_locality() {
    let server = TestApiServer::start().await.unwrap();
    server
        .create("nodes", node("n1", "us-east1", "us-east1-b"))
        .unwrap();
    server.create("pods", pod_on("web-1", "n1")).unwrap();
    server.create("pods", pod_on("web-2", "n2")).unwrap();
    let env = Env::start(server).await;
    env.wait_for("web-1 in us-east1/us-east1-b", |o| {
        node_locality(o, "Pod shop/web-1").as_deref() == Some("us-east1/us-east1-b")
    })
    .await;
    let objects = env.objects().await;
    assert_eq!(
        node_locality(&objects, "Pod shop/web-2").as_deref(),
        Some("")
    );
    assert!(
        !objects.keys().any(|k| k.starts_with("Node")),
        "{objects:?}"
    );

    env.server
        .create("nodes", node("n2", "eu-west1", "eu-west1-a"))
        .unwrap();
    env.server
        .apply("nodes", node("n1", "us-east1", "us-east1-c"))
        .unwrap();
    env.wait_for("both pods at their nodes' new localities", |o| {
        node_locality(o, "Pod shop/web-1").as_deref() == Some("us-east1/us-east1-c")
            && node_locality(o, "Pod shop/web-2").as_deref() == Some("eu-west1/eu-west1-a")
    })
    .await;
    env.stop().await;
}

fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

fn service_in(namespace: &str, name: &str) -> Value {
    let mut s = service(name);
    s["metadata"]["namespace"] = json!(namespace);
    s
}

/// Istio's discovery selectors: only namespaces a selector matches are read, and a
/// namespace relabelled in or out brings its objects in or takes them out at once.
#[tokio::test]
async fn discovery_selectors_choose_namespaces_by_label() {
    let server = TestApiServer::start().await.unwrap();
    server
        .create("namespaces", namespace("shop", json!({"mesh": "on"})))
        .unwrap();
    server
        .create("namespaces", namespace("legacy", json!({})))
        .unwrap();
    server
        .create("services", service_in("shop", "reviews"))
        .unwrap();
    server
        .create("services", service_in("legacy", "billing"))
        .unwrap();
    let config = KubeSourceConfig {
        discovery_selectors: vec!["mesh=on".parse().unwrap()],
        ..KubeSourceConfig::default()
    };
    let env = Env::start_with(server, config).await;
    env.wait_for("shop's service", |o| o.contains_key("Service shop/reviews"))
        .await;
    let objects = env.objects().await;
    assert!(
        !objects.contains_key("Service legacy/billing"),
        "{objects:?}"
    );
    assert!(
        objects.contains_key("Namespace /legacy"),
        "namespaces are always read"
    );

    env.server
        .apply("namespaces", namespace("legacy", json!({"mesh": "on"})))
        .unwrap();
    env.server
        .apply("namespaces", namespace("shop", json!({})))
        .unwrap();
    env.wait_for("legacy in, shop out", |o| {
        o.contains_key("Service legacy/billing") && !o.contains_key("Service shop/reviews")
    })
    .await;
    // A new object in a namespace out of the selection stays out.
    env.server
        .create("services", service_in("shop", "ratings"))
        .unwrap();
    env.server
        .create("services", service_in("legacy", "invoices"))
        .unwrap();
    env.wait_for("the new legacy service", |o| {
        o.contains_key("Service legacy/invoices")
    })
    .await;
    assert!(!env.objects().await.contains_key("Service shop/ratings"));
    env.stop().await;
}

fn configmap(namespace: &str, name: &str, data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    })
}

#[tokio::test]
async fn the_mesh_config_is_read_from_the_system_namespace_only_whatever_the_selectors() {
    let server = TestApiServer::start().await.unwrap();
    let mesh = json!({"mesh": "rootNamespace: mesh-root\naccessLogFile: /dev/stdout\n"});
    server
        .create(
            "configmaps",
            configmap("istio-system", "istio", mesh.clone()),
        )
        .unwrap();
    server
        .create(
            "configmaps",
            configmap(
                "istio-system",
                "istio-ca-root-cert",
                json!({"root-cert.pem": "x"}),
            ),
        )
        .unwrap();
    server
        .create("configmaps", configmap("shop", "istio", mesh))
        .unwrap();
    server
        .create("services", service_in("shop", "reviews"))
        .unwrap();
    let config = KubeSourceConfig {
        // istio-system is not selected: its mesh config is read all the same.
        discovery_selectors: vec!["mesh=on".parse().unwrap()],
        system_namespace: Some("istio-system".into()),
        ..KubeSourceConfig::default()
    };
    let env = Env::start_with(server, config).await;
    env.wait_for("the mesh config", |o| {
        o.contains_key("MeshConfig istio-system/istio")
    })
    .await;
    let objects = env.objects().await;
    let mesh_configs: Vec<_> = objects
        .keys()
        .filter(|k| k.starts_with("MeshConfig"))
        .collect();
    assert_eq!(mesh_configs, ["MeshConfig istio-system/istio"]);
    let shoal_proto::config::Spec::MeshConfig(mesh) =
        &objects["MeshConfig istio-system/istio"].spec
    else {
        panic!("not a mesh config");
    };
    assert_eq!(mesh.root_namespace(), "mesh-root");

    // A change is followed; an invalid one is rejected and the valid one stays.
    env.server
        .apply(
            "configmaps",
            configmap(
                "istio-system",
                "istio",
                json!({"mesh": "outboundTrafficPolicy: {mode: NOPE}"}),
            ),
        )
        .unwrap();
    env.wait_for("the rejection", |_| {
        env.handle
            .rejections_json()
            .to_string()
            .contains("outboundTrafficPolicy.mode")
    })
    .await;
    assert!(
        env.objects()
            .await
            .contains_key("MeshConfig istio-system/istio")
    );
    env.stop().await;
}
