//! Mirroring: a VirtualService copies requests to a shadow subset, fire and forget,
//! while clients get the primary's answers; `mirror` (one target) and `mirrors`
//! (several, each with a percentage).

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use std::time::{Duration, Instant};

const DESTINATION_RULE: &str = r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: orders
  namespace: traffic
spec:
  host: orders
  subsets:
  - {name: primary, labels: {version: primary}}
  - {name: shadow, labels: {version: shadow}}
  - {name: shadow2, labels: {version: shadow2}}
"#;

const MIRROR: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: orders
  namespace: traffic
spec:
  hosts: [orders]
  http:
  - route: [{destination: {host: orders, subset: primary}}]
    mirror: {host: orders, subset: shadow}
    mirrorPercentage: {value: 100}
"#;

const MIRRORS: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: orders
  namespace: traffic
spec:
  hosts: [orders]
  http:
  - route: [{destination: {host: orders, subset: primary}}]
    mirrors:
    - destination: {host: orders, subset: shadow2}
      percentage: {value: 100}
"#;

/// Waits (a few seconds at most: mirrors are sent asynchronously) until `shadow`
/// has received `count` requests.
async fn shadow_receives(mesh: &Mesh, shadow: &HttpBackend, count: usize) {
    let started = Instant::now();
    while shadow.received_count() < count && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        shadow.received_count(),
        count,
        "{} should have received a copy of each request\n{}",
        shadow.name(),
        mesh.logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_copy_requests_to_shadow_subsets() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let primary = HttpBackend::start("orders-primary").await;
    let shadow = HttpBackend::start("orders-shadow").await;
    let shadow2 = HttpBackend::start("orders-shadow2").await;
    let port = free_port();
    let host = fqdn("orders", CLIENT_NS);
    mesh.write(
        "orders.yaml",
        &workloads::service(
            CLIENT_NS,
            "orders",
            "http",
            port,
            &[
                primary.workload("primary"),
                shadow.workload("shadow"),
                shadow2.workload("shadow2"),
            ],
        ),
    );
    mesh.write("orders-rule.yaml", DESTINATION_RULE);

    for (config, target) in [(MIRROR, &shadow), (MIRRORS, &shadow2)] {
        mesh.apply(
            "orders-route.yaml",
            config,
            &format!("a first copy at {}", target.name()),
            async || {
                mesh.get(port, &host, "/order").await?;
                expect(target.received_count() > 0, "no copy yet")
            },
        )
        .await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        target.clear_received();
        for _ in 0..20 {
            let r = mesh.must_get(port, &host, "/order").await;
            assert_eq!(
                r.served_by(),
                Ok("orders-primary"),
                "clients get the primary's answer, never the shadow's"
            );
        }
        shadow_receives(&mesh, target, 20).await;
    }
    mesh.finish().await;
}
