//! ServiceEntry resolutions beyond DNS: `STATIC` (the entry's own endpoints, balanced
//! over by EDS, selected by subset labels) and `DNS_ROUND_ROBIN` (Envoy resolves the
//! endpoint's name itself and connects to the first address: LOGICAL_DNS).

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{Mesh, expect};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use std::collections::BTreeSet;

fn entries(static_port: u16, a: u16, b: u16, dns_port: u16, c: u16) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: ledger
  namespace: traffic
spec:
  hosts: [ledger.internal.test]
  location: MESH_INTERNAL
  resolution: STATIC
  ports:
  - {{number: {static_port}, name: http, protocol: HTTP}}
  endpoints:
  - {{address: 127.0.0.1, ports: {{http: {a}}}, labels: {{version: a}}}}
  - {{address: 127.0.0.1, ports: {{http: {b}}}, labels: {{version: b}}}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: ledger
  namespace: traffic
spec:
  host: ledger.internal.test
  subsets:
  - {{name: b, labels: {{version: b}}}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: rates
  namespace: traffic
spec:
  hosts: [rates.example.test]
  resolution: DNS_ROUND_ROBIN
  ports:
  - {{number: {dns_port}, name: http, protocol: HTTP}}
  endpoints:
  - {{address: localhost, ports: {{http: {c}}}}}
"#
    )
}

const ONLY_B: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: ledger
  namespace: traffic
spec:
  hosts: [ledger.internal.test]
  http:
  - route: [{destination: {host: ledger.internal.test, subset: b}}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_entries_balance_over_their_endpoints_and_round_robin_dns_resolves() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let (a, b, c) = (
        HttpBackend::start("ledger-a").await,
        HttpBackend::start("ledger-b").await,
        HttpBackend::start("rates").await,
    );
    let (static_port, dns_port) = (free_port(), free_port());
    let mut seen = BTreeSet::new();
    mesh.apply(
        "entries.yaml",
        &entries(static_port, a.port(), b.port(), dns_port, c.port()),
        "both STATIC endpoints answering",
        async || {
            let r = mesh.get(static_port, "ledger.internal.test", "/").await?;
            seen.insert(r.served_by()?.to_string());
            expect(seen.len() == 2, format!("{seen:?}"))
        },
    )
    .await;
    let r = mesh.must_get(dns_port, "rates.example.test", "/").await;
    assert_eq!(r.served_by(), Ok("rates"), "{r}");

    // A subset of a STATIC entry selects its endpoints by label.
    let mut streak = 0;
    mesh.apply(
        "ledger-route.yaml",
        ONLY_B,
        "20 answers in a row from ledger-b",
        async || {
            let r = mesh.get(static_port, "ledger.internal.test", "/").await?;
            streak = if r.backend() == Some("ledger-b") {
                streak + 1
            } else {
                0
            };
            expect(streak >= 20, format!("{streak} in a row; last {r}"))
        },
    )
    .await;
    mesh.finish().await;
}
