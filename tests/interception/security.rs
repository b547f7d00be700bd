//! Istio's security between captured pods (see [`crate::secure`]): the client's
//! sidecar reaches the server's over mTLS with certificates from Shoal's CA (auto mTLS),
//! PeerAuthentication decides whether the server also accepts a plaintext client, and
//! AuthorizationPolicies are enforced by the server's sidecar on the identity the mTLS
//! carries. Each family runs twice: client on SotW and server on Delta, then the other
//! way round.

use crate::secure::{
    CLIENT, INBOUND_HANDSHAKES, OTHER, OUTSIDE, SERVER, SERVER_HOST, SERVER_TCP_TARGET, SNIFFED,
    SecureMesh, UNDECLARED,
};
use crate::sidecar::expect_stat;
use crate::support::envoy::XdsApi;

fn peer_authentication(mode: &str) -> String {
    format!(
        "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {{name: default, namespace: srv}}\nspec:\n  mtls: {{mode: {mode}}}\n"
    )
}

/// An AuthorizationPolicy in `srv`; `selector` a YAML line (or nothing: namespace-wide).
fn policy(name: &str, selector: &str, action: &str, rules: &str) -> String {
    format!(
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: {name}, namespace: srv}}\nspec:\n{selector}  action: {action}\n  rules:\n{rules}"
    )
}

const SELECT_SERVER: &str = "  selector: {matchLabels: {app: server}}\n";

async fn mtls_and_peer_authentication(client_api: XdsApi, server_api: XdsApi) {
    let Some(m) = SecureMesh::start(client_api, server_api, &[CLIENT]).await else {
        return;
    };

    // PERMISSIVE (no policy): the client's request reaches the backend through both
    // sidecars, over TLS: the client's cluster made a handshake, the server's
    // virtualInbound accepted one, and the server's Envoy holds the certificate the CA
    // issued for its service account.
    m.expect("client → server", &[(CLIENT, "/hello", "200")])
        .await;
    let reply = m.request(CLIENT, "/hello");
    assert!(
        reply.starts_with("200 server peer=127.0.0.6 path=/hello"),
        "the backend saw the server sidecar's inbound passthrough address: {reply}"
    );
    let logs = || m.logs();
    expect_stat(
        m.sidecar(CLIENT),
        &format!("cluster.outbound|80||{SERVER_HOST}.ssl.handshake"),
        logs,
    )
    .await;
    expect_stat(m.sidecar(SERVER), INBOUND_HANDSHAKES, logs).await;
    // TCP too: the echo port's cluster speaks the mesh's mTLS.
    let echo = m
        .eventually("client → server echo", || async { m.tcp(CLIENT, "ping") })
        .await;
    assert_eq!(echo, "echo peer=127.0.0.6 ping");
    expect_stat(
        m.sidecar(CLIENT),
        &format!("cluster.outbound|5000||{SERVER_HOST}.ssl.handshake"),
        logs,
    )
    .await;
    let certs = m.sidecar(SERVER).admin("/certs").expect("server /certs");
    assert!(
        certs.contains("spiffe://cluster.local/ns/srv/sa/server"),
        "{certs}"
    );

    // A plaintext client from a pod without a sidecar is accepted too, over no TLS.
    let before = m.sidecar(SERVER).stat(INBOUND_HANDSHAKES).unwrap();
    m.expect("plaintext accepted", &[(OUTSIDE, "/plain", "200")])
        .await;
    assert_eq!(
        m.tcp(OUTSIDE, "plain").as_deref(),
        Ok("echo peer=127.0.0.6 plain")
    );
    let after = m.sidecar(SERVER).stat(INBOUND_HANDSHAKES).unwrap();
    assert_eq!(before, after, "the outside pod's requests were plaintext");

    // STRICT in srv: the plaintext client is refused, the meshed client still served.
    m.apply("pa.yaml", &peer_authentication("STRICT"));
    m.eventually("plaintext refused", || async {
        match m.request(OUTSIDE, "/plain") {
            r if r.starts_with("no response") => Ok(()),
            r => Err(format!("the outside pod got {r}")),
        }
    })
    .await;
    m.eventually("plaintext TCP refused", || async {
        match m.tcp(OUTSIDE, "plain") {
            Err(_) => Ok(()),
            Ok(echo) => Err(format!("the outside pod got {echo:?}")),
        }
    })
    .await;
    for _ in 0..5 {
        let reply = m.request(CLIENT, "/strict");
        assert!(reply.starts_with("200"), "{reply}\n{}", m.logs());
        let echo = m.tcp(CLIENT, "strict");
        assert_eq!(
            echo.as_deref(),
            Ok("echo peer=127.0.0.6 strict"),
            "{}",
            m.logs()
        );
    }

    // The server's own policy, STRICT but PERMISSIVE on the echo's target port: the
    // plaintext client's TCP is accepted again, its HTTP still refused.
    m.apply(
        "pa-server.yaml",
        &format!(
            "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {{name: server, namespace: srv}}\nspec:\n  selector: {{matchLabels: {{app: server}}}}\n  mtls: {{mode: STRICT}}\n  portLevelMtls: {{{SERVER_TCP_TARGET}: {{mode: PERMISSIVE}}}}\n"
        ),
    );
    m.eventually("plaintext TCP accepted on its port", || async {
        m.tcp(OUTSIDE, "port")
    })
    .await;
    let reply = m.request(OUTSIDE, "/plain");
    assert!(reply.starts_with("no response"), "{reply}");

    // DISABLE in srv (the server's own policy gone): the client's auto mTLS turns to
    // plaintext, which the server accepts, as it does the outside pod's.
    m.apply("pa-server.yaml", "");
    m.apply("pa.yaml", &peer_authentication("DISABLE"));
    m.expect("plaintext accepted again", &[(OUTSIDE, "/plain", "200")])
        .await;
    m.eventually("the client's requests plaintext", || async {
        let before = m.sidecar(SERVER).stat(INBOUND_HANDSHAKES)?;
        let reply = m.request(CLIENT, "/disabled");
        let after = m.sidecar(SERVER).stat(INBOUND_HANDSHAKES)?;
        if reply.starts_with("200") && before == after {
            Ok(())
        } else {
            Err(format!("{reply}; handshakes {before} → {after}"))
        }
    })
    .await;
    m.finish();
}

async fn authorization(client_api: XdsApi, server_api: XdsApi) {
    let Some(m) = SecureMesh::start(client_api, server_api, &[CLIENT, OTHER]).await else {
        return;
    };
    let undeclared = |path: &str| format!("{UNDECLARED}{path}");
    let (any, admin) = (undeclared("/"), undeclared("/admin"));
    let (sniffed, sniffed_admin) = (format!("{SNIFFED}/"), format!("{SNIFFED}/admin"));
    m.expect(
        "both clients reach the server",
        &[
            (CLIENT, "/", "200"),
            (OTHER, "/", "200"),
            (OUTSIDE, &any, "200"),
            (CLIENT, &any, "200"),
        ],
    )
    .await;
    let echoes = |from: &str| m.tcp(from, "hi").is_ok();

    // ALLOW by principal: the client's mTLS identity is admitted, the other meshed
    // client (another service account) and the plaintext client are not; on the TCP
    // port too, whose RBAC sees the same identity.
    m.apply(
        "allow.yaml",
        &policy(
            "only-client",
            SELECT_SERVER,
            "ALLOW",
            "  - from: [{source: {principals: [\"cluster.local/ns/cli/sa/client\"]}}]\n",
        ),
    );
    m.expect(
        "ALLOW client only",
        &[
            (CLIENT, "/", "200"),
            (OTHER, "/", "403"),
            (OUTSIDE, "/", "403"),
            // virtualInbound's passthrough chains are guarded too; the client's own
            // request there is plaintext (PassthroughCluster), so no principal either.
            (OUTSIDE, &any, "403"),
            (CLIENT, &any, "403"),
        ],
    )
    .await;
    m.eventually("TCP: the client alone echoed", || async {
        match (echoes(CLIENT), echoes(OTHER), echoes(OUTSIDE)) {
            (true, false, false) => Ok(()),
            seen => Err(format!("echoed (client, other, outside): {seen:?}")),
        }
    })
    .await;

    // DENY by path, the ALLOW now another workload's: /admin is refused to everyone,
    // the rest served. On the TCP port, which has no path, the DENY denies all (Istio
    // fails closed).
    m.apply(
        "allow.yaml",
        &policy(
            "for-nobody",
            "  selector: {matchLabels: {app: nobody}}\n",
            "ALLOW",
            "  - {}\n",
        ),
    );
    m.apply(
        "deny.yaml",
        &policy(
            "no-admin",
            SELECT_SERVER,
            "DENY",
            "  - to: [{operation: {paths: [\"/admin*\"]}}]\n",
        ),
    );
    m.expect(
        "DENY /admin*",
        &[
            (CLIENT, "/admin/x", "403"),
            (OTHER, "/admin", "403"),
            (OUTSIDE, "/admin", "403"),
            (OUTSIDE, &admin, "403"),
            // A port not named for a protocol: both sidecars sniff HTTP, and the
            // client's mTLS announces HTTP (ALPN istio-http/1.1), so the server's L7
            // policy applies to the meshed client as to the plaintext one.
            (CLIENT, &sniffed_admin, "403"),
            (OUTSIDE, &sniffed_admin, "403"),
            (CLIENT, &sniffed, "200"),
            (OUTSIDE, &sniffed, "200"),
            (CLIENT, "/", "200"),
            (OTHER, "/", "200"),
            (OUTSIDE, "/", "200"),
            (OUTSIDE, &any, "200"),
        ],
    )
    .await;
    m.eventually("TCP denied", || async {
        match m.tcp(CLIENT, "hi") {
            Err(_) => Ok(()),
            Ok(echo) => Err(format!("the client got {echo:?}")),
        }
    })
    .await;

    // A namespace-wide ALLOW (no selector) that admits /public alone: every other
    // request to the server is denied, whoever asks.
    m.apply(
        "allow.yaml",
        &policy(
            "only-public",
            "",
            "ALLOW",
            "  - to: [{operation: {paths: [\"/public\"]}}]\n",
        ),
    );
    m.expect(
        "namespace-wide ALLOW /public only",
        &[
            (CLIENT, "/public", "200"),
            (OTHER, "/public", "200"),
            (OUTSIDE, "/public", "200"),
            (CLIENT, "/", "403"),
            (OTHER, "/", "403"),
            (OUTSIDE, "/", "403"),
            (CLIENT, "/admin", "403"),
        ],
    )
    .await;
    m.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_pods_talk_mtls_and_strict_refuses_plaintext_client_sotw_server_delta() {
    let _serial = crate::SERIAL.lock().await;
    mtls_and_peer_authentication(XdsApi::Sotw, XdsApi::Delta).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_pods_talk_mtls_and_strict_refuses_plaintext_client_delta_server_sotw() {
    let _serial = crate::SERIAL.lock().await;
    mtls_and_peer_authentication(XdsApi::Delta, XdsApi::Sotw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_server_enforces_authorization_policies_client_sotw_server_delta() {
    let _serial = crate::SERIAL.lock().await;
    authorization(XdsApi::Sotw, XdsApi::Delta).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_server_enforces_authorization_policies_client_delta_server_sotw() {
    let _serial = crate::SERIAL.lock().await;
    authorization(XdsApi::Delta, XdsApi::Sotw).await;
}
