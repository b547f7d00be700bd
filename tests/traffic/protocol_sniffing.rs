//! Ports not named for a protocol are sniffed, as Istio does: Envoy's HTTP inspector
//! finds HTTP on one (so a VirtualService's header match routes it) while raw TCP on
//! another still reaches its backend.

use crate::SERIAL;
use crate::backend::tcp::exchange;
use crate::backend::{Backend, HttpBackend, TcpEcho};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

const ROUTING: &str = r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: catalog
  namespace: traffic
spec:
  host: catalog
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: catalog
  namespace: traffic
spec:
  hosts: [catalog]
  http:
  - match:
    - headers: {x-version: {exact: v2}}
    route:
    - destination: {host: catalog, subset: v2}
  - route:
    - destination: {host: catalog, subset: v1}
"#;

async fn echo(port: u16) -> Result<String, String> {
    exchange("127.0.0.1", port, "ping\n").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unnamed_ports_carry_routed_http_and_raw_tcp() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let v1 = HttpBackend::start("catalog-v1").await;
    let v2 = HttpBackend::start("catalog-v2").await;
    let ledger = TcpEcho::start("ledger-v1").await;
    let (http_port, tcp_port) = (free_port(), free_port());
    let host = fqdn("catalog", CLIENT_NS);
    // Port names with no protocol prefix, and no `protocol` field: unknown protocols.
    mesh.write(
        "catalog.yaml",
        &workloads::service(
            CLIENT_NS,
            "catalog",
            "web",
            http_port,
            &[v1.workload("v1"), v2.workload("v2")],
        ),
    );
    mesh.write(
        "ledger.yaml",
        &workloads::service(
            CLIENT_NS,
            "ledger",
            "ledger",
            tcp_port,
            &[ledger.workload("v1")],
        ),
    );
    let with_header = || {
        mesh.request(reqwest::Method::GET, http_port, &host, "/")
            .header("x-version", "v2")
    };
    mesh.apply(
        "catalog-routing.yaml",
        ROUTING,
        "the header match routing sniffed HTTP to v2",
        async || {
            let r = mesh.send(with_header()).await?;
            expect(r.served_by()? == "catalog-v2", format!("{r}"))?;
            let r = mesh.get(http_port, &host, "/").await?;
            expect(r.served_by()? == "catalog-v1", format!("{r}"))
        },
    )
    .await;
    for _ in 0..5 {
        assert_eq!(
            mesh.must_send(with_header()).await.served_by(),
            Ok("catalog-v2")
        );
        assert_eq!(
            mesh.must_get(http_port, &host, "/").await.served_by(),
            Ok("catalog-v1")
        );
    }
    mesh.eventually("raw TCP on the other unnamed port", async || {
        let got = echo(tcp_port).await?;
        expect(got == "ledger-v1: ping\n", format!("echo {got:?}"))
    })
    .await;
    for _ in 0..5 {
        let got = echo(tcp_port).await;
        assert_eq!(got.as_deref(), Ok("ledger-v1: ping\n"), "{}", mesh.logs());
    }
    mesh.finish().await;
}
