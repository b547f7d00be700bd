//! The Secrets source against the kube-test-server (a stand-in for the API server: see
//! its docs for what it does not do): istio-ca-secret created once and shared, a plug-in
//! CA's new intermediate followed through the watch, a self-signed root renewed and
//! written back.

use super::*;
use crate::ca::source::tests::{intermediate, root};
use serde_json::json;
use shoal_kube_test_server::TestApiServer;

const NS: &str = "istio-system";

async fn setup() -> (TestApiServer, kube::Client) {
    let server = TestApiServer::start().await.unwrap();
    let client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    (server, client)
}

fn b64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn cacerts(root: &str, cert: &str, key: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": PLUGIN_SECRET, "namespace": NS},
        "data": {
            "ca-cert.pem": b64(cert),
            "ca-key.pem": b64(key),
            "cert-chain.pem": b64(&format!("{cert}{root}")),
            "root-cert.pem": b64(root),
        }
    })
}

async fn changed(source: &mut RunningSource) -> Arc<SigningMaterial> {
    tokio::time::timeout(Duration::from_secs(10), source.material.changed())
        .await
        .expect("new material within 10 s")
        .unwrap();
    source.material.borrow_and_update().clone()
}

#[tokio::test]
async fn without_secrets_one_root_is_created_in_istio_ca_secret_and_shared() {
    let (server, client) = setup().await;
    let config = KubeSecretsConfig::new(client, NS, "cluster.local");
    // Edges starting together: one creates the Secret, the others read the winner's.
    let (a, b, c) = tokio::join!(
        start(config.clone()),
        start(config.clone()),
        start(config.clone())
    );
    let issuers: Vec<Vec<u8>> = [a, b, c]
        .into_iter()
        .map(|s| s.unwrap().material.borrow().issuer_der().to_vec())
        .collect();
    assert!(issuers.iter().all(|i| *i == issuers[0]), "one root for all");

    let secret = server
        .get("secrets", NS, SELF_SIGNED_SECRET)
        .expect("istio-ca-secret created");
    assert_eq!(secret["type"], SELF_SIGNED_SECRET_TYPE);
    assert!(secret["data"]["ca-key.pem"].is_string());
    // A restart reads it back.
    let again = start(config).await.unwrap();
    assert_eq!(again.material.borrow().issuer_der(), issuers[0]);
}

#[tokio::test]
async fn a_plugin_ca_in_cacerts_is_used_and_its_new_intermediate_followed() {
    let (server, client) = setup().await;
    let root = root();
    let (cert_a, key_a) = intermediate(&root, "Intermediate A");
    server
        .create("secrets", cacerts(&root.0, &cert_a, &key_a))
        .unwrap();
    let mut source = start(KubeSecretsConfig::new(client, NS, "cluster.local"))
        .await
        .unwrap();
    let first = source.material.borrow_and_update().issuer_der().to_vec();
    assert!(
        server.get("secrets", NS, SELF_SIGNED_SECRET).is_none(),
        "a plug-in CA needs no self-signed root"
    );

    // A broken update (a key of another certificate) is refused, the old kept.
    let (_, stray_key) = intermediate(&root, "Stray");
    server
        .apply("secrets", cacerts(&root.0, &cert_a, &stray_key))
        .unwrap();
    // A good one is used from the moment the watch brings it.
    let (cert_b, key_b) = intermediate(&root, "Intermediate B");
    server
        .apply("secrets", cacerts(&root.0, &cert_b, &key_b))
        .unwrap();
    let next = changed(&mut source).await;
    assert_ne!(next.issuer_der(), first);
    assert_eq!(next.root_bundle_pem().trim(), root.0.trim());
}

#[tokio::test]
async fn a_broken_cacerts_at_start_is_an_error_naming_the_secret() {
    let (server, client) = setup().await;
    let root = root();
    let (cert, _) = intermediate(&root, "A");
    let (_, other_key) = intermediate(&root, "B");
    server
        .create("secrets", cacerts(&root.0, &cert, &other_key))
        .unwrap();
    let Err(error) = start(KubeSecretsConfig::new(client, NS, "cluster.local")).await else {
        panic!("a broken plug-in CA must stop the start, as istiod");
    };
    assert!(
        error.to_string().contains("Secret istio-system/cacerts"),
        "{error}"
    );
}

#[tokio::test]
async fn a_self_signed_root_due_is_renewed_written_back_and_followed_by_other_edges() {
    let (server, client) = setup().await;
    // A root in its last fifth already (4 s, less nothing of the 2-minute skew grace).
    let due =
        SigningMaterial::self_signed("cluster.local", Duration::from_secs(4), SystemTime::now())
            .unwrap();
    let (cert, key) = due.istio_ca_secret_pem().unwrap();
    server
        .create(
            "secrets",
            json!({
                "metadata": {"name": SELF_SIGNED_SECRET, "namespace": NS},
                "type": SELF_SIGNED_SECRET_TYPE,
                "data": {"ca-cert.pem": b64(&cert), "ca-key.pem": b64(&key)},
            }),
        )
        .unwrap();
    let mut config = KubeSecretsConfig::new(client, NS, "cluster.local");
    config.check_interval = Duration::from_millis(200);
    let mut follower_config = config.clone();
    follower_config.check_interval = Duration::from_secs(3600);
    let mut follower = start(follower_config).await.unwrap();
    let mut renewing = start(config).await.unwrap();
    let created = server.get("secrets", NS, SELF_SIGNED_SECRET).unwrap();
    let old = renewing.material.borrow_and_update().issuer_der().to_vec();

    let renewed = changed(&mut renewing).await;
    assert_ne!(renewed.issuer_der(), old);
    let written = server.get("secrets", NS, SELF_SIGNED_SECRET).unwrap();
    assert_ne!(
        written["data"]["ca-cert.pem"],
        created["data"]["ca-cert.pem"]
    );
    assert_eq!(
        written["data"]["ca-key.pem"], created["data"]["ca-key.pem"],
        "a renewal keeps the key"
    );
    // The other edge reads the renewed root from the watch (it never renews itself).
    let followed = loop {
        let m = changed(&mut follower).await;
        if m.issuer_der() != old {
            break m;
        }
    };
    let now = server.get("secrets", NS, SELF_SIGNED_SECRET).unwrap();
    let pem = String::from_utf8(
        base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            now["data"]["ca-cert.pem"].as_str().unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(followed.root_bundle_pem().contains(pem.trim()));
}
