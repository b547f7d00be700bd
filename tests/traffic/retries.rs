//! Retries: a VirtualService's `retries` hides a backend's transient 5xx from clients,
//! up to the number of attempts it allows.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

const VIRTUAL_SERVICE: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: flaky
  namespace: traffic
spec:
  hosts: [flaky]
  http:
  - route: [{destination: {host: flaky}}]
    retries:
      attempts: 3
      retryOn: 5xx
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_hide_a_flaky_backend_up_to_the_attempts_allowed() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
    let backend = HttpBackend::start("flaky-v1").await;
    let port = free_port();
    let host = fqdn("flaky", CLIENT_NS);
    mesh.write(
        "flaky.yaml",
        &workloads::service(CLIENT_NS, "flaky", "http", port, &[backend.workload("v1")]),
    );
    // The default route retries twice at most: a 200 despite three planned failures
    // shows the VirtualService's retries are in place.
    mesh.apply(
        "flaky-route.yaml",
        VIRTUAL_SERVICE,
        "three 503s retried into a 200",
        async || {
            backend.fail_next(3, 503);
            let r = mesh.get(port, &host, "/").await?;
            expect(r.status == 200, r)
        },
    )
    .await;

    // Two failures, then success: the client sees the third attempt's 200.
    backend.clear_received();
    backend.fail_next(2, 503);
    let r = mesh.must_get(port, &host, "/").await;
    assert_eq!(
        r.served_by(),
        Ok("flaky-v1"),
        "two 503s within 3 retries should be hidden\n{}",
        mesh.logs()
    );
    assert_eq!(
        backend.received_count(),
        3,
        "the backend should have seen 2 failed attempts and 1 good one: {:?}",
        backend.received()
    );

    // Four failures outlast 1 try + 3 retries: the client gets the last 503.
    backend.clear_received();
    backend.fail_next(4, 503);
    let r = mesh.must_get(port, &host, "/").await;
    assert_eq!(r.status, 503, "4 failures exceed 3 retries: {r}");
    assert_eq!(
        backend.received_count(),
        4,
        "1 try and 3 retries: {:?}",
        backend.received()
    );
    mesh.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_retries_retry_a_503_as_istio_does() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let backend = HttpBackend::start("flaky-v1").await;
    let port = free_port();
    let host = fqdn("flaky", CLIENT_NS);
    mesh.apply(
        "flaky.yaml",
        &workloads::service(CLIENT_NS, "flaky", "http", port, &[backend.workload("v1")]),
        "flaky served (no VirtualService)",
        async || mesh.get(port, &host, "/").await?.served_by().map(|_| ()),
    )
    .await;

    backend.clear_received();
    backend.fail_next(1, 503);
    let r = mesh.must_get(port, &host, "/").await;
    assert_eq!(
        r.served_by(),
        Ok("flaky-v1"),
        "Istio's default retries hide one 503\n{}",
        mesh.logs()
    );
    assert_eq!(
        backend.received_count(),
        2,
        "one 503 and its retry: {:?}",
        backend.received()
    );
    mesh.finish().await;
}
