//! What the secure port refuses, each with istiod's status: direct clients, TLS verified
//! as the agent verifies it.

use crate::client::{ads_first_response, create_certificate, expect_code};
use crate::k8s::namespace;
use crate::mesh::{Mesh, spiffe};
use std::time::Duration;
use tonic::Code;

const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const WAIT: Duration = Duration::from_secs(10);

fn sidecar(namespace: &str) -> String {
    format!("sidecar~127.0.0.1~probe.{namespace}~{namespace}.svc.cluster.local")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secure_port_refuses_spoofed_nodes_foreign_csrs_and_bad_or_missing_tokens() {
    let _serial = crate::SERIAL.lock().await;
    let config = vec![(
        "ns.yaml",
        format!("{}---\n{}", namespace("alpha"), namespace("beta")),
    )];
    let mesh = Mesh::start(&config, &[]).await;
    let alpha = mesh.issuer.istio_token("alpha", "a");

    // The control: the right token gets its certificate and its config.
    let chain = create_certificate(&mesh, &spiffe("alpha", "a"), Some(&alpha))
        .await
        .unwrap_or_else(|s| panic!("alpha's own CSR refused: {s:?}\n{}", mesh.shoal.tail(30)));
    assert!(chain.len() >= 3, "leaf, intermediate, root: {chain:?}");
    let ok = ads_first_response(
        &mesh,
        &sidecar("alpha"),
        "alpha",
        Some(&alpha),
        LDS,
        &[],
        WAIT,
    )
    .await;
    assert!(ok.is_ok(), "alpha's own stream refused: {ok:?}");

    // A node ID claiming another namespace: PERMISSION_DENIED naming both.
    let spoofed = ads_first_response(
        &mesh,
        &sidecar("beta"),
        "beta",
        Some(&alpha),
        LDS,
        &[],
        WAIT,
    )
    .await;
    let status = expect_code("spoofed node", spoofed, Code::PermissionDenied);
    assert!(
        status.message().contains("alpha") && status.message().contains("beta"),
        "the refusal names neither the claim nor the identity: {}",
        status.message()
    );

    // A CSR for another namespace's identity: refused by the CA.
    let foreign = create_certificate(&mesh, &spiffe("beta", "b"), Some(&alpha)).await;
    expect_code("CSR for another namespace", foreign, Code::InvalidArgument);

    // Expired and wrong-audience tokens, and no token: UNAUTHENTICATED, on both services.
    let expired = mesh.issuer.expired_token("alpha", "a");
    let audience = mesh.issuer.wrong_audience_token("alpha", "a");
    for (what, token) in [
        ("expired token", Some(expired.as_str())),
        ("wrong audience", Some(audience.as_str())),
        ("no credentials", None),
    ] {
        let ads =
            ads_first_response(&mesh, &sidecar("alpha"), "alpha", token, LDS, &[], WAIT).await;
        expect_code(&format!("ADS, {what}"), ads, Code::Unauthenticated);
        let ca = create_certificate(&mesh, &spiffe("alpha", "a"), token).await;
        expect_code(&format!("CSR, {what}"), ca, Code::Unauthenticated);
    }
}
