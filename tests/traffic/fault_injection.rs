//! Fault injection: a VirtualService's `fault` delays or aborts requests before they
//! reach the backend, for all of them or a percentage.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use std::time::Duration;

const VIRTUAL_SERVICE: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: ratings
  namespace: traffic
spec:
  hosts: [ratings]
  http:
  - name: delayed
    match: [{uri: {prefix: /delay}}]
    fault:
      delay:
        fixedDelay: 1s
        percentage: {value: 100}
    route: [{destination: {host: ratings}}]
  - name: teapot
    match: [{uri: {prefix: /abort}}]
    fault:
      abort:
        httpStatus: 418
        percentage: {value: 100}
    route: [{destination: {host: ratings}}]
  - name: half-broken
    match: [{uri: {prefix: /half}}]
    fault:
      abort:
        httpStatus: 503
        percentage: {value: 50}
    route: [{destination: {host: ratings}}]
  - route: [{destination: {host: ratings}}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_delay_and_abort_requests() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
    let backend = HttpBackend::start("ratings-v1").await;
    let port = free_port();
    let host = fqdn("ratings", CLIENT_NS);
    mesh.write(
        "ratings.yaml",
        &workloads::service(
            CLIENT_NS,
            "ratings",
            "http",
            port,
            &[backend.workload("v1")],
        ),
    );
    mesh.apply(
        "ratings-route.yaml",
        VIRTUAL_SERVICE,
        "418 from the abort fault on /abort",
        async || {
            let r = mesh.get(port, &host, "/abort").await?;
            expect(r.status == 418, r)
        },
    )
    .await;

    backend.clear_received();
    for _ in 0..5 {
        let r = mesh.must_get(port, &host, "/abort").await;
        assert_eq!(r.status, 418, "the 100% abort fault: {r}");
    }
    assert_eq!(
        backend.received_count(),
        0,
        "aborted requests must not reach the backend: {:?}",
        backend.received()
    );

    let delayed = mesh.must_get(port, &host, "/delay").await;
    let r = &delayed;
    assert_eq!(
        r.served_by(),
        Ok("ratings-v1"),
        "a delayed request still succeeds"
    );
    assert!(
        r.elapsed >= Duration::from_millis(900) && r.elapsed < Duration::from_secs(5),
        "the 1s delay fault took {:?}",
        r.elapsed
    );
    let r = mesh.must_get(port, &host, "/").await;
    assert!(
        r.elapsed < Duration::from_millis(900),
        "a route without a fault took {:?}",
        r.elapsed
    );

    let mut aborted = 0;
    for _ in 0..100 {
        let r = mesh.must_get(port, &host, "/half").await;
        match r.status {
            503 if r.backend().is_none() => aborted += 1,
            200 => {}
            _ => panic!("the 50% abort answered {r}"),
        }
    }
    assert!(
        (30..=70).contains(&aborted),
        "the 50% abort fault aborted {aborted} of 100 requests"
    );
    println!(
        "fault: the 1s delay took {:?}; the 50% abort aborted {aborted} of 100",
        delayed.elapsed
    );
    mesh.finish().await;
}
