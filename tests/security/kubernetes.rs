//! Shoal on an API server, as in a cluster: no plug-in files and no JWKS, so the CA keeps
//! its self-signed root in `istio-ca-secret`, tokens are checked with TokenReview, and the
//! root is published as `istio-ca-root-cert` in every mesh namespace. A workload pins
//! that ConfigMap's root (as a pod mounting it does: the agent's `XDS_ROOT_CA`), gets a
//! certificate and its config over 15012, and a real Envoy routes with it. The API
//! server is the kube-test-server, a stand-in: it enforces no RBAC (the chart's rules
//! are checked in tests/helm).

use crate::bootstrap::Node;
use crate::client::create_certificate;
use crate::k8s::{Workload, namespace, service};
use crate::mesh::{Mesh, spiffe};
use crate::support::{backend, free_port};
use serde_json::json;
use shoal_kube_test_server::{ServiceAccountIssuer, Settings, TestApiServer};
use shoal_test_support::jwt::TestIssuer;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_kubernetes_the_root_is_published_and_a_workload_pinning_it_is_served() {
    let _serial = crate::SERIAL.lock().await;
    let issuer = TestIssuer::new("https://kubernetes.default.svc.cluster.local");
    let api = TestApiServer::start_with(Settings {
        service_account_issuer: Some(ServiceAccountIssuer::new(issuer.issuer(), issuer.jwk_set())),
        ..Default::default()
    })
    .await
    .expect("kube-test-server");
    for ns in ["istio-system", "shop", "kube-system"] {
        api.create("namespaces", json!({"metadata": {"name": ns}}))
            .unwrap();
    }
    let app = backend::start("app", "127.0.0.1").await;
    let svc_port = free_port();
    let config = vec![
        ("ns.yaml", namespace("shop")),
        (
            "app.yaml",
            service(
                "shop",
                "app",
                "http",
                svc_port,
                &[Workload::new("app-0", "v1", app.addr.port())],
            ),
        ),
    ];
    let mesh = Mesh::start_on_kubernetes(&config, &api, issuer).await;

    // The root lives in istio-ca-secret; every mesh namespace has it, kube-system not.
    assert!(
        api.get("secrets", "istio-system", "istio-ca-secret")
            .is_some(),
        "istio-ca-secret created"
    );
    let in_shop = api
        .get("configmaps", "shop", "istio-ca-root-cert")
        .expect("istio-ca-root-cert in shop");
    assert_eq!(in_shop["data"]["root-cert.pem"], mesh.root_pem.as_str());
    assert!(
        api.get("configmaps", "kube-system", "istio-ca-root-cert")
            .is_none()
    );

    // CreateCertificate over TLS pinned to the published root, the token reviewed by
    // the API server; the chain ends at that root.
    let token = mesh.issuer.istio_token("shop", "web");
    let chain = create_certificate(&mesh, &spiffe("shop", "web"), Some(&token))
        .await
        .expect("a certificate for a reviewed token");
    assert_eq!(
        chain.last().map(|c| c.trim()),
        Some(mesh.root_pem.trim()),
        "the chain ends at the published root"
    );

    // A workload whose agent pins the published root gets its config over 15012 and a
    // real Envoy routes by it.
    let agent = mesh.agent("web", "shop", "web", "1h");
    let envoy = mesh.envoy(
        "web-envoy",
        &Node {
            kind: "sidecar",
            ip: "127.0.0.2",
            namespace: "shop",
            pod: "web-0",
            service_account: "web",
            labels: "{app: web}",
            api_type: "GRPC",
        },
        &agent,
    );
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let url = format!("http://127.0.0.2:{svc_port}/");
    mesh.eventually(
        &format!(
            "{url} routed to app\n--- agent ---\n{}\n--- envoy ---\n{}",
            agent.proc.tail(20),
            envoy.proc.tail(20)
        ),
        LONG,
        async || {
            let resp = http
                .get(&url)
                .header("host", "app.shop.svc.cluster.local")
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let body = resp.text().await.map_err(|e| e.to_string())?;
            if body == "app" {
                Ok(())
            } else {
                Err(format!("answered {body:?}"))
            }
        },
    )
    .await;
    let syncz = mesh.syncz().await;
    assert!(
        syncz.contains(&spiffe("shop", "web")),
        "the stream is authenticated as its service account: {syncz}"
    );
}
