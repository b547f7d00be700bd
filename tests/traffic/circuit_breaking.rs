//! Circuit breaking: a DestinationRule's `connectionPool` caps connections and queued
//! requests to a service; what exceeds the caps is refused at once with a 503 that
//! Envoy marks `x-envoy-overloaded`, instead of piling onto a slow backend.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, Reply, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use reqwest::Method;
use std::time::Duration;

const DESTINATION_RULE: &str = r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: ledger
  namespace: traffic
spec:
  host: ledger
  trafficPolicy:
    connectionPool:
      tcp:
        maxConnections: 1
      http:
        http1MaxPendingRequests: 1
        maxRequestsPerConnection: 1
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_pool_limits_turn_excess_requests_into_overflow_503s() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let backend = HttpBackend::start("ledger-v1").await;
    let port = free_port();
    let host = fqdn("ledger", CLIENT_NS);
    let cluster = format!("outbound|{port}||{host}");
    mesh.write(
        "ledger.yaml",
        &workloads::service(CLIENT_NS, "ledger", "http", port, &[backend.workload("v1")]),
    );
    // With `track_remaining`, Envoy's gauge of pending requests still allowed shows the
    // limit in force: 1 here, 2^32-1 with Istio's default thresholds.
    let remaining_pending = format!("cluster.{cluster}.circuit_breakers.default.remaining_pending");
    mesh.apply(
        "ledger-rule.yaml",
        DESTINATION_RULE,
        "the connection pool limits on the ledger cluster",
        async || {
            mesh.get(port, &host, "/").await?.served_by()?;
            let remaining = mesh.stat(&remaining_pending).await;
            expect(remaining == 1, format!("{remaining_pending} = {remaining}"))
        },
    )
    .await;

    // 20 requests at once to a backend that takes 1 s: one is sent, one may wait,
    // the rest overflow.
    backend.delay(Duration::from_secs(1));
    let in_flight: Vec<_> = (0..20)
        .map(|_| tokio::spawn(Reply::fetch(mesh.request(Method::GET, port, &host, "/"))))
        .collect();
    let mut replies = Vec::new();
    for request in in_flight {
        replies.push(request.await.expect("request task"));
    }
    let mut ok = 0;
    let mut overloaded = 0;
    for r in &replies {
        match r {
            Ok(r) if r.status == 200 => ok += 1,
            Ok(r) if r.status == 503 && r.header("x-envoy-overloaded") == Some("true") => {
                overloaded += 1
            }
            other => panic!(
                "expected a 200 or an overflow 503, got {other:?}\n{}",
                mesh.logs()
            ),
        }
    }
    assert!(
        ok >= 1 && overloaded >= 10,
        "expected a few 200s and mostly overflow 503s of 20 concurrent requests, got {ok} 200s and {overloaded} overflows"
    );
    let overflow = mesh
        .stat(&format!("cluster.{cluster}.upstream_rq_pending_overflow"))
        .await;
    assert_eq!(
        overflow, overloaded,
        "Envoy's pending-overflow counter should count the overflow 503s"
    );
    println!("circuit breaking: of 20 concurrent requests {ok} served, {overloaded} overflowed");
    mesh.finish().await;
}
