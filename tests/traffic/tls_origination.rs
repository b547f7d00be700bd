//! TLS origination: with `trafficPolicy.tls` the sidecar speaks TLS to a backend that
//! terminates it. SIMPLE verifies the backend's certificate against `caCertificates`
//! and `subjectAltNames` and sends the `sni` given (a wrong SAN fails the request);
//! MUTUAL also presents the client certificate a backend requiring one accepts. The CA
//! and certificates are made by the test; the DestinationRule names their files.

use crate::SERIAL;
use crate::backend::tls::TestPki;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

/// The name in the backend's certificate, and the SNI the sidecar is told to send.
const SERVER_NAME: &str = "carts.example.com";

fn destination_rule(tls: &str) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: carts
  namespace: traffic
spec:
  host: carts
  trafficPolicy:
    tls:
{tls}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simple_tls_checks_the_server_certificate_and_sends_sni() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
    let files = tempfile::tempdir().expect("tempdir");
    let pki = TestPki::new(files.path());
    let backend =
        HttpBackend::start_tls("carts-tls", pki.server_config(&[SERVER_NAME], false)).await;
    let port = free_port();
    let host = fqdn("carts", CLIENT_NS);
    let simple = |san: &str| {
        destination_rule(&format!(
            "      mode: SIMPLE\n      caCertificates: {}\n      sni: {SERVER_NAME}\n      subjectAltNames: [{san}]\n",
            pki.path("ca.pem")
        ))
    };
    mesh.write("carts-rule.yaml", &simple(SERVER_NAME));
    mesh.write(
        "carts.yaml",
        &workloads::service(CLIENT_NS, "carts", "http", port, &[backend.workload("v1")]),
    );
    mesh.eventually("an answer over TLS", async || {
        mesh.get(port, &host, "/").await?.served_by().map(|_| ())
    })
    .await;
    let reply = mesh.must_get(port, &host, "/").await;
    assert_eq!(
        reply.header("x-echo-x-tls-sni"),
        Some(SERVER_NAME),
        "{reply}"
    );
    assert_eq!(
        reply.header("x-echo-x-tls-client-cert"),
        Some("none"),
        "{reply}"
    );

    // The certificate does not name the SAN required: Envoy refuses the backend.
    mesh.apply(
        "carts-rule.yaml",
        &simple("billing.example.com"),
        "requests failing on the SAN check",
        async || {
            let reply = mesh.get(port, &host, "/").await?;
            expect(reply.status == 503 && reply.backend().is_none(), &reply)
        },
    )
    .await;
    let failures = mesh
        .stat(&format!(
            "cluster.outbound|{port}||{host}.ssl.fail_verify_san"
        ))
        .await;
    assert!(
        failures > 0,
        "no SAN verification failure counted\n{}",
        mesh.logs()
    );
    mesh.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_presents_the_client_certificate() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let files = tempfile::tempdir().expect("tempdir");
    let pki = TestPki::new(files.path());
    let backend =
        HttpBackend::start_tls("carts-mtls", pki.server_config(&[SERVER_NAME], true)).await;
    let port = free_port();
    let host = fqdn("carts", CLIENT_NS);
    let ca = pki.path("ca.pem");

    // SIMPLE presents no certificate: the backend ends each handshake.
    mesh.write(
        "carts-rule.yaml",
        &destination_rule(&format!(
            "      mode: SIMPLE\n      caCertificates: {ca}\n      sni: {SERVER_NAME}\n"
        )),
    );
    mesh.write(
        "carts.yaml",
        &workloads::service(CLIENT_NS, "carts", "http", port, &[backend.workload("v1")]),
    );
    mesh.eventually("handshakes refused for want of a certificate", async || {
        // Once Envoy has the TLS cluster, no request goes out in plaintext.
        let dump = mesh.config_dump("dynamic_active_clusters").await;
        expect(
            dump.contains("envoy.transport_sockets.tls"),
            "no TLS transport socket in the clusters yet",
        )?;
        let before = backend.failed_handshakes();
        let reply = mesh.get(port, &host, "/").await?;
        expect(reply.backend().is_none(), format!("served: {reply}"))?;
        expect(
            backend.failed_handshakes() > before,
            format!("no handshake refused for {reply}"),
        )
    })
    .await;
    assert_eq!(backend.received_count(), 0, "a request got through");

    mesh.apply(
        "carts-rule.yaml",
        &destination_rule(&format!(
            "      mode: MUTUAL\n      caCertificates: {ca}\n      sni: {SERVER_NAME}\n      clientCertificate: {}\n      privateKey: {}\n      subjectAltNames: [{SERVER_NAME}]\n",
            pki.path("client.pem"),
            pki.path("client-key.pem"),
        )),
        "an answer over mutual TLS",
        async || mesh.get(port, &host, "/").await?.served_by().map(|_| ()),
    )
    .await;
    let reply = mesh.must_get(port, &host, "/").await;
    assert_eq!(
        reply.header("x-echo-x-tls-client-cert"),
        Some("present"),
        "{reply}"
    );
    assert_eq!(
        reply.header("x-echo-x-tls-sni"),
        Some(SERVER_NAME),
        "{reply}"
    );
    mesh.finish().await;
}
