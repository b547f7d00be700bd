//! Route timeouts: Envoy gives up on a slow backend after the VirtualService's
//! `timeout` and answers 504, while a route with a longer timeout waits for it.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use std::time::Duration;

const VIRTUAL_SERVICE: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: slow
  namespace: traffic
spec:
  hosts: [slow]
  http:
  - name: patient
    match: [{headers: {x-patient: {exact: "yes"}}}]
    route: [{destination: {host: slow}}]
    timeout: 5s
  - name: impatient
    route: [{destination: {host: slow}}]
    timeout: 500ms
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_timeout_answers_504_before_a_slow_backend() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let backend = HttpBackend::start("slow-v1").await;
    backend.delay(Duration::from_secs(2));
    let port = free_port();
    let host = fqdn("slow", CLIENT_NS);
    mesh.write(
        "slow.yaml",
        &workloads::service(CLIENT_NS, "slow", "http", port, &[backend.workload("v1")]),
    );
    // The default route has no timeout: until the VirtualService is in place, the
    // backend answers 200 after 2 s.
    mesh.apply(
        "slow-route.yaml",
        VIRTUAL_SERVICE,
        "a 504 from the 500ms route",
        async || {
            let r = mesh.get(port, &host, "/").await?;
            expect(r.status == 504, r)
        },
    )
    .await;

    let r = mesh.must_get(port, &host, "/").await;
    assert_eq!(r.status, 504, "expected Envoy's upstream timeout, got {r}");
    assert!(
        r.elapsed >= Duration::from_millis(450) && r.elapsed < Duration::from_millis(1900),
        "the 500ms timeout answered after {:?} (the backend takes 2 s): {r}",
        r.elapsed
    );
    assert!(
        r.body.contains("upstream request timeout"),
        "expected Envoy's timeout body, got {r}"
    );

    println!(
        "route timeout 500ms: 504 after {} ms",
        r.elapsed.as_millis()
    );
    let patient = mesh
        .must_send(
            mesh.request(reqwest::Method::GET, port, &host, "/")
                .header("x-patient", "yes"),
        )
        .await;
    assert_eq!(
        patient.served_by(),
        Ok("slow-v1"),
        "the 5s route should wait for the 2 s backend"
    );
    assert!(
        patient.elapsed >= Duration::from_millis(1900),
        "the backend delays 2 s, yet the answer came after {:?}",
        patient.elapsed
    );
    mesh.finish().await;
}
