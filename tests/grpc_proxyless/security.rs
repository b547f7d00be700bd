//! Proxyless gRPC security with real grpcio: an xDS-credentials client calling two xDS
//! servers over mTLS with certificates from Shoal's CA (the servers answer with the
//! client's SPIFFE ID), STRICT refusing a plaintext client, an AuthorizationPolicy DENY
//! by method path answered PERMISSION_DENIED by the servers' RBAC filter, and an ALLOW by
//! principal admitting the client's mTLS identity only.

use crate::config::{self, NS};
use crate::harness::{Mesh, calls_of};
use std::time::{Duration, Instant};

fn strict() -> String {
    format!(
        r#"apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: default
  namespace: {NS}
spec:
  mtls: {{mode: STRICT}}
"#
    )
}

fn deny_who() -> String {
    format!(
        r#"apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: echo-authz
  namespace: {NS}
spec:
  selector:
    matchLabels: {{app: echo}}
  action: DENY
  rules:
  - to:
    - operation:
        paths: ["/shoal.test.Echo/Who"]
"#
    )
}

/// An ALLOW of the servers for `principal` alone.
fn allow_only(principal: &str) -> String {
    format!(
        r#"apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: echo-authz
  namespace: {NS}
spec:
  selector:
    matchLabels: {{app: echo}}
  action: ALLOW
  rules:
  - from:
    - source:
        principals: ["{principal}"]
"#
    )
}

/// Waits until the last 10 of the calls made since `from` all start with `prefix`.
async fn ten_in_a_row(mesh: &Mesh, from: usize, prefix: &str) {
    mesh.wait_for_calls(&format!("10 calls in a row: {prefix}"), |calls| {
        let recent = &calls[from.min(calls.len())..];
        recent.len() >= 10
            && recent[recent.len() - 10..]
                .iter()
                .all(|c| c.starts_with(prefix))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxyless_mtls_strict_and_authorization() {
    let mesh = Mesh::start_secure(&[("peer.yaml", &strict())]).await;
    let client = config::spiffe(config::CLIENT_ACCOUNT);

    // mTLS: both servers see the client's certificate.
    mesh.wait_for_calls("both servers answering the client's SPIFFE ID", |calls| {
        ["echo-v1", "echo-v2"]
            .iter()
            .all(|s| calls.iter().any(|c| *c == format!("ok {s} {client}")))
    })
    .await;
    assert!(
        mesh.calls()
            .iter()
            .filter(|c| c.starts_with("ok "))
            .all(|c| c.ends_with(&client)),
        "a call without the client's identity: {:?}",
        mesh.calls()
    );

    // STRICT: a plaintext client is refused.
    let port = mesh.server_ports()[0];
    let mut plain = mesh.plain_client("plain", &format!("127.0.0.1:{port}"));
    let started = Instant::now();
    while calls_of(&plain).len() < 3 {
        plain.assert_running();
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "{}",
            plain.tail(10)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let plain_calls = calls_of(&plain);
    assert!(
        plain_calls.iter().all(|c| c.starts_with("err UNAVAILABLE")),
        "STRICT answered a plaintext client: {plain_calls:?}"
    );
    plain.stop(Duration::from_secs(2));

    // DENY by path: the servers refuse the method.
    let from = mesh.calls().len();
    mesh.write("authz.yaml", &deny_who());
    ten_in_a_row(&mesh, from, "err PERMISSION_DENIED").await;

    // ALLOW by principal (the certificate's SPIFFE ID): the client's admits it, another's
    // does not.
    let principal = client.trim_start_matches("spiffe://");
    let from = mesh.calls().len();
    mesh.write("authz.yaml", &allow_only(principal));
    ten_in_a_row(&mesh, from, "ok ").await;
    let from = mesh.calls().len();
    mesh.write("authz.yaml", &allow_only("cluster.local/ns/grpc/sa/other"));
    ten_in_a_row(&mesh, from, "err PERMISSION_DENIED").await;
    mesh.stop().await;
}
