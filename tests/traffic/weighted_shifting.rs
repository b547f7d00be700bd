//! Weighted routing: traffic moves between subsets as a VirtualService shifts weights.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

fn virtual_service(v1: u32, v2: u32) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
  namespace: traffic
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {{host: reviews, subset: v1}}
      weight: {v1}
    - destination: {{host: reviews, subset: v2}}
      weight: {v2}
"#
    )
}

const DESTINATION_RULE: &str = r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: reviews
  namespace: traffic
spec:
  host: reviews
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_shift_traffic_from_all_v1_to_70_30() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let v1 = HttpBackend::start("reviews-v1").await;
    let v2 = HttpBackend::start("reviews-v2").await;
    let port = free_port();
    let host = fqdn("reviews", CLIENT_NS);
    mesh.write(
        "reviews.yaml",
        &workloads::service(
            CLIENT_NS,
            "reviews",
            "http",
            port,
            &[v1.workload("v1"), v2.workload("v2")],
        ),
    );
    mesh.write("reviews-rule.yaml", DESTINATION_RULE);

    // All to v1 first: 20 v1 answers in a row cannot come from the default route,
    // which balances over both pods.
    let mut streak = 0;
    mesh.apply(
        "reviews-route.yaml",
        &virtual_service(100, 0),
        "20 answers in a row from reviews-v1 (weights 100/0)",
        async || {
            let r = mesh.get(port, &host, "/").await?;
            streak = if r.backend() == Some("reviews-v1") {
                streak + 1
            } else {
                0
            };
            expect(streak >= 20, format!("{streak} in a row; last {r}"))
        },
    )
    .await;

    // Shift 30% to v2: the first v2 answer shows the new weights are in place.
    mesh.apply(
        "reviews-route.yaml",
        &virtual_service(70, 30),
        "a first answer from reviews-v2 (weights 70/30)",
        async || {
            let r = mesh.get(port, &host, "/").await?;
            expect(r.backend() == Some("reviews-v2"), r)
        },
    )
    .await;

    let (mut from_v1, mut from_v2) = (0u32, 0u32);
    for _ in 0..300 {
        let r = mesh.must_get(port, &host, "/").await;
        match r.served_by() {
            Ok("reviews-v1") => from_v1 += 1,
            Ok("reviews-v2") => from_v2 += 1,
            _ => panic!(
                "unexpected answer during the 70/30 split: {r}\n{}",
                mesh.logs()
            ),
        }
    }
    let v1_share = 100.0 * f64::from(from_v1) / 300.0;
    assert!(
        (62.0..=78.0).contains(&v1_share),
        "v1 got {v1_share:.1}% of 300 requests, expected 70 ± 8 (v1={from_v1}, v2={from_v2})"
    );
    println!("weighted 70/30: v1={from_v1} v2={from_v2} of 300");
    mesh.finish().await;
}
