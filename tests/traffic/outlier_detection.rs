//! Outlier detection: an endpoint that keeps answering 5xx is ejected from its
//! subset's load balancing, and the healthy one takes the traffic.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

const DESTINATION_RULE: &str = r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: payments
  namespace: traffic
spec:
  host: payments
  trafficPolicy:
    outlierDetection:
      consecutive5xxErrors: 1
      interval: 1s
      baseEjectionTime: 30s
      maxEjectionPercent: 100
  subsets:
  - {name: v1, labels: {version: v1}}
"#;

// No retries, so that every 503 the failing endpoint gives reaches the client and the
// test sees exactly what the load balancer did.
const VIRTUAL_SERVICE: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: payments
  namespace: traffic
spec:
  hosts: [payments]
  http:
  - route: [{destination: {host: payments, subset: v1}}]
    retries: {attempts: 0}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outlier_detection_ejects_the_endpoint_that_keeps_failing() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
    let healthy = HttpBackend::start("payments-healthy").await;
    let broken = HttpBackend::start("payments-broken").await;
    broken.fail_always(503);
    let port = free_port();
    let host = fqdn("payments", CLIENT_NS);
    let ejections =
        format!("cluster.outbound|{port}|v1|{host}.outlier_detection.ejections_enforced_total");
    mesh.write(
        "payments.yaml",
        &workloads::service(
            CLIENT_NS,
            "payments",
            "http",
            port,
            &[healthy.workload("v1"), broken.workload("v1")],
        ),
    );
    mesh.write("payments-rule.yaml", DESTINATION_RULE);
    // Warm-up: requests reach the broken endpoint until its first 503 ejects it.
    mesh.apply(
        "payments-route.yaml",
        VIRTUAL_SERVICE,
        "the broken endpoint ejected from the v1 subset",
        async || {
            mesh.get(port, &host, "/").await?;
            let n = mesh.stat(&ejections).await;
            expect(n > 0, format!("{ejections} = {n}"))
        },
    )
    .await;

    healthy.clear_received();
    broken.clear_received();
    let mut failed = Vec::new();
    for _ in 0..50 {
        let r = mesh.must_get(port, &host, "/").await;
        if r.served_by() != Ok("payments-healthy") {
            failed.push(r);
        }
    }
    assert!(
        failed.len() <= 1,
        "after the ejection nearly all of 50 requests should reach the healthy endpoint; {} did not: {:?}\n{}",
        failed.len(),
        failed.iter().map(ToString::to_string).collect::<Vec<_>>(),
        mesh.logs()
    );
    assert!(
        broken.received_count() <= 1,
        "the ejected endpoint still got {} requests",
        broken.received_count()
    );
    println!(
        "outlier detection: {} of 50 served by the healthy endpoint after the ejection",
        50 - failed.len()
    );
    mesh.finish().await;
}
