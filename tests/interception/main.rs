//! Sidecars with real traffic capture: a client pod and a server pod, each a network
//! namespace with Istio's iptables rules and an Envoy (uid 1337) configured by Shoal,
//! so that a request from the client application passes the client's outbound side and
//! the server's inbound side, as in a Kubernetes pod.
//!
//! ```text
//!  client ns                                        server ns
//!  curl 10.96.x.10:80 ─OUTPUT→15001─► Envoy (SotW) ─► pod IP:8080 ─PREROUTING→15006─►
//!     outbound|80||server.srv...                        Envoy (Delta) inbound|8080||
//!                                                       └─ from 127.0.0.6 ─► backend :8080
//!  root ns: shoal (xDS) on the client link's root address
//! ```
//! [`security`] runs the same capture with Istio's security: certificates from Shoal's
//! CA through agent stand-ins, auto mTLS, PeerAuthentication and AuthorizationPolicy.
//!
//! Needs root (namespaces, iptables) and `ip`, `iptables`, `setpriv`, `curl`; without
//! them each test says why and passes. Run `cargo build --bins -p shoal -p
//! shoal-agent-stand-in` first.

#[path = "../support/mod.rs"]
mod support;

// The security tests' Shoal with its CA, agent stand-ins and their Envoy bootstraps.
#[allow(dead_code)]
#[path = "../security/bootstrap.rs"]
mod bootstrap;
#[allow(dead_code)]
#[path = "../security/mesh.rs"]
mod mesh;
#[allow(dead_code)]
#[path = "../security/pki.rs"]
mod pki;

mod network;
mod secure;
mod security;
mod sidecar;

use network::Network;
use sidecar::{Mesh, SERVER_HTTP_TARGET, SERVER_TCP_TARGET};
use support::envoy::XdsApi;

/// Each test makes namespaces named after this process and starts Shoal and Envoys:
/// one at a time.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_client_and_server_talk_through_both_sidecars() {
    let _serial = SERIAL.lock().await;
    if let Some(why) = network::unsupported() {
        eprintln!("skipping: {why}");
        return;
    }
    let net = match Network::create(&["client", "server"]) {
        Ok(net) => net,
        Err(e) => {
            // A container without CAP_NET_ADMIN cannot make namespaces: say so, pass.
            eprintln!("skipping: cannot create network namespaces: {e}");
            return;
        }
    };
    net.capture(&["client", "server"])
        .expect("install Istio's iptables rules");
    let mesh = Mesh::start(net, XdsApi::Sotw, XdsApi::Delta).await;

    // HTTP: through the client's outbound listener and the server's inbound chain.
    let reply = mesh
        .eventually("HTTP through both sidecars", || mesh.client_http("/hello"))
        .await;
    assert!(
        reply.starts_with("server peer=127.0.0.6 path=/hello"),
        "the backend saw the server sidecar's inbound passthrough address: {reply}"
    );
    let host = sidecar::SERVER_HOST;
    mesh.expect_stat(
        mesh.client_envoy(),
        &format!("cluster.outbound|80||{host}.upstream_rq_total"),
    )
    .await;
    mesh.expect_stat(
        mesh.server_envoy(),
        &format!("cluster.inbound|{SERVER_HTTP_TARGET}||.upstream_rq_total"),
    )
    .await;
    mesh.expect_stat(
        mesh.server_envoy(),
        &format!("http.inbound_0.0.0.0_{SERVER_HTTP_TARGET}.downstream_rq_total"),
    )
    .await;

    // TCP: the same path, proxied as bytes.
    let echo = mesh
        .eventually("TCP through both sidecars", || mesh.client_tcp("ping"))
        .await;
    assert_eq!(echo.trim(), "echo peer=127.0.0.6 ping");
    mesh.expect_stat(
        mesh.client_envoy(),
        &format!("cluster.outbound|5000||{host}.upstream_cx_total"),
    )
    .await;
    mesh.expect_stat(
        mesh.server_envoy(),
        &format!("cluster.inbound|{SERVER_TCP_TARGET}||.upstream_cx_total"),
    )
    .await;

    // A port no service declares: out through PassthroughCluster, in through
    // virtualInbound's passthrough chains, still captured on both sides.
    let direct = mesh
        .eventually("HTTP to an undeclared port", || mesh.client_http_direct())
        .await;
    assert!(direct.starts_with("server peer=127.0.0.6"), "{direct}");
    mesh.expect_stat(
        mesh.server_envoy(),
        "cluster.InboundPassthroughCluster.upstream_rq_total",
    )
    .await;

    mesh.finish().await;
}
