//! A TCP service on a port another service speaks HTTP on: istiod gives the TCP
//! service's VIP its own filter chain on the port's HTTP listener, ahead of the HTTP
//! chain, so its connections are forwarded as bytes while HTTP to others is routed.
//!
//! Without interception the sidecar's listener binds the proxy's address, where every
//! connection's destination is the same; a Sidecar egress listener binding the port on
//! `0.0.0.0` lets the client dial the TCP service's VIP (`127.0.0.2`, a loopback
//! address) and the HTTP service at `127.0.0.1`, as captured traffic keeps its
//! original destination.

use crate::SERIAL;
use crate::backend::tcp::exchange;
use crate::backend::{Backend, HttpBackend, TcpEcho};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

const TCP_VIP: &str = "127.0.0.2";

fn sidecar(port: u16) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata:
  name: default
  namespace: traffic
spec:
  egress:
  - port: {{number: {port}, protocol: HTTP, name: http}}
    bind: 0.0.0.0
    hosts: ["./*"]
  - hosts: ["./*"]
"#
    )
}

/// The TCP service, with a cluster IP (the harness's services have none).
fn tcp_service(port: u16, echo: &TcpEcho) -> String {
    workloads::service(
        CLIENT_NS,
        "ledger",
        "tcp-ledger",
        port,
        &[echo.workload("v1")],
    )
    .replacen("spec:\n", &format!("spec:\n  clusterIP: {TCP_VIP}\n"), 1)
}

async fn echo(ip: &str, port: u16) -> Result<String, String> {
    exchange(ip, port, "ping\n").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tcp_service_sharing_an_http_port_keeps_its_own_chain() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
    let web = HttpBackend::start("web-v1").await;
    let ledger = TcpEcho::start("ledger-v1").await;
    let port = free_port();
    let host = fqdn("web", CLIENT_NS);
    mesh.write("sidecar.yaml", &sidecar(port));
    mesh.write(
        "web.yaml",
        &workloads::service(CLIENT_NS, "web", "http", port, &[web.workload("v1")]),
    );
    mesh.write("ledger.yaml", &tcp_service(port, &ledger));
    mesh.eventually("HTTP to web and TCP to ledger on one port", async || {
        mesh.get(port, &host, "/").await?.served_by().map(|_| ())?;
        let got = echo(TCP_VIP, port).await?;
        expect(got == "ledger-v1: ping\n", format!("echo {got:?}"))
    })
    .await;
    for _ in 0..5 {
        let r = mesh.must_get(port, &host, "/").await;
        assert_eq!(r.served_by(), Ok("web-v1"), "{}", mesh.logs());
        let got = echo(TCP_VIP, port).await;
        assert_eq!(got.as_deref(), Ok("ledger-v1: ping\n"), "{}", mesh.logs());
    }
    mesh.finish().await;
}

/// Istio's fall-through chain on an outbound HTTP listener bound to the wildcard
/// (`buildSidecarOutboundListener`: the HTTP chain matches what the HTTP inspector finds
/// to be HTTP, the rest goes to `PassthroughCluster`, or `BlackHoleCluster` under
/// REGISTRY_ONLY): TCP sent to an HTTP port that no service claims is blackholed, where
/// the HTTP codec answered `400 Bad Request` before, while HTTP on the port is still
/// routed. (ALLOW_ANY's passthrough needs captured traffic: without it the original
/// destination is Envoy's own listener.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_to_an_http_port_falls_through_to_the_blackhole_under_registry_only() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let web = HttpBackend::start("web-v1").await;
    let port = free_port();
    let host = fqdn("web", CLIENT_NS);
    mesh.write(
        "sidecar.yaml",
        &format!(
            "{}outboundTrafficPolicy: {{mode: REGISTRY_ONLY}}\n",
            sidecar(port)
        )
        .replace("\noutboundTrafficPolicy", "\n  outboundTrafficPolicy"),
    );
    mesh.write(
        "web.yaml",
        &workloads::service(CLIENT_NS, "web", "http", port, &[web.workload("v1")]),
    );
    mesh.eventually("HTTP to web on the port's wildcard listener", async || {
        mesh.get(port, &host, "/").await?.served_by().map(|_| ())
    })
    .await;
    // The blackhole closes (or resets) the connection without a byte; the HTTP codec
    // answered `HTTP/1.1 400 Bad Request`.
    let got = echo("127.0.0.1", port).await;
    assert!(
        got.as_ref()
            .is_err_and(|e| e.starts_with("closed") || e.contains("reset")),
        "TCP on the HTTP port got {got:?}\n{}",
        mesh.logs()
    );
    let r = mesh.must_get(port, &host, "/").await;
    assert_eq!(r.served_by(), Ok("web-v1"), "{r}");
    mesh.finish().await;
}
