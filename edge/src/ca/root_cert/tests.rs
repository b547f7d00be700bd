//! The publisher against the kube-test-server (a stand-in for the API server: see its
//! docs for what it does not do): every mesh namespace gets the root, a new namespace
//! too, an edited or deleted ConfigMap is put back, a new root reaches every one, and an
//! edge writes only the namespaces the ring gives it.

use super::*;
use serde_json::json;
use shoal_kube_test_server::TestApiServer;
use shoal_proto::config::selector::LabelSelector;
use shoal_proto::transport::Member;
use std::time::SystemTime;

async fn setup(namespaces: &[&str]) -> (TestApiServer, kube::Client) {
    let server = TestApiServer::start().await.unwrap();
    for ns in namespaces {
        server
            .create("namespaces", json!({"metadata": {"name": ns}}))
            .unwrap();
    }
    let client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    (server, client)
}

fn material() -> Arc<SigningMaterial> {
    Arc::new(
        SigningMaterial::self_signed(
            "cluster.local",
            Duration::from_secs(3600),
            SystemTime::now(),
        )
        .unwrap(),
    )
}

fn published(server: &TestApiServer, namespace: &str) -> Option<String> {
    server
        .get("configmaps", namespace, CONFIGMAP_NAME)
        .and_then(|cm| cm["data"][ROOT_CERT_KEY].as_str().map(str::to_owned))
}

/// Polls until `check` holds (a watch-driven writer has no completion to await).
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within 10 s: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn spawn(
    client: kube::Client,
    config: RootCertConfig,
    material: watch::Receiver<Arc<SigningMaterial>>,
    ownership: Ownership,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(run(
        client,
        config,
        material,
        ownership,
        std::future::pending(),
    ))
}

#[tokio::test]
async fn every_mesh_namespace_gets_the_root_and_keeps_it() {
    let (server, client) = setup(&["istio-system", "shop", "kube-system"]).await;
    let first = material();
    let bundle = first.root_bundle_pem().to_owned();
    let (material_tx, material_rx) = watch::channel(first);
    let task = spawn(
        client,
        RootCertConfig::default(),
        material_rx,
        Ownership::All,
    );

    eventually("shop and istio-system published", || {
        published(&server, "shop").as_deref() == Some(bundle.as_str())
            && published(&server, "istio-system").as_deref() == Some(bundle.as_str())
    })
    .await;
    let cm = server.get("configmaps", "shop", CONFIGMAP_NAME).unwrap();
    assert_eq!(cm["metadata"]["labels"]["istio.io/config"], "true");
    assert!(
        published(&server, "kube-system").is_none(),
        "ignored namespace"
    );

    // A new namespace gets one.
    server
        .create("namespaces", json!({"metadata": {"name": "new"}}))
        .unwrap();
    eventually("new published", || published(&server, "new").is_some()).await;

    // An edit is put back, keeping the keys someone added; a deletion is undone.
    let mut edited = server.get("configmaps", "shop", CONFIGMAP_NAME).unwrap();
    edited["data"][ROOT_CERT_KEY] = json!("tampered");
    edited["data"]["extra"] = json!("kept");
    server.replace("configmaps", edited).unwrap();
    server.delete("configmaps", "new", CONFIGMAP_NAME).unwrap();
    eventually("shop restored and new recreated", || {
        published(&server, "shop").as_deref() == Some(bundle.as_str())
            && published(&server, "new").as_deref() == Some(bundle.as_str())
    })
    .await;
    let shop = server.get("configmaps", "shop", CONFIGMAP_NAME).unwrap();
    assert_eq!(shop["data"]["extra"], "kept");

    // A new root reaches every namespace.
    let next = material();
    let next_bundle = next.root_bundle_pem().to_owned();
    material_tx.send(next).unwrap();
    eventually("the new root everywhere", || {
        ["istio-system", "shop", "new"]
            .iter()
            .all(|ns| published(&server, ns).as_deref() == Some(next_bundle.as_str()))
    })
    .await;
    // Once current, nothing is written again.
    let revision = server.revision();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.revision(), revision, "a steady mesh costs no writes");
    task.abort();
}

#[tokio::test]
async fn only_selected_namespaces_and_only_those_this_edge_owns_are_written() {
    let (server, client) = setup(&[]).await;
    const MESH: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];
    for (name, mesh) in MESH.iter().map(|n| (*n, true)).chain([("off", false)]) {
        let labels = if mesh {
            json!({"istio-discovery": "enabled"})
        } else {
            json!({})
        };
        server
            .create(
                "namespaces",
                json!({"metadata": {"name": name, "labels": labels}}),
            )
            .unwrap();
    }
    let config = RootCertConfig {
        filter: NamespaceFilter {
            namespaces: vec![],
            discovery_selectors: vec![LabelSelector::parse("istio-discovery=enabled").unwrap()],
        },
        ..RootCertConfig::default()
    };
    let member = |id: &str| Member {
        id: id.into(),
        xds_addr: String::new(),
    };
    let ring = Arc::new(Ring::new(vec![member("edge-1"), member("edge-2")]));
    let (_ring_tx, ring_rx) = watch::channel(ring.clone());
    let (_material_tx, material_rx) = watch::channel(material());
    let task = spawn(
        client,
        config,
        material_rx,
        Ownership::Ring {
            me: "edge-1".into(),
            ring: ring_rx,
        },
    );
    let mine: Vec<&str> = MESH
        .into_iter()
        .filter(|ns| ring.owns("edge-1", &format!("ns/{ns}")))
        .collect();
    assert!(
        !mine.is_empty() && mine.len() < MESH.len(),
        "the ring splits the namespaces: {mine:?}"
    );
    eventually("edge-1's namespaces published", || {
        mine.iter().all(|ns| published(&server, ns).is_some())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for ns in MESH.into_iter().chain(["off"]) {
        let expected = mine.contains(&ns);
        assert_eq!(published(&server, ns).is_some(), expected, "namespace {ns}");
    }
    task.abort();
}
