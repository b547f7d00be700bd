//! A ServiceEntry whose `addresses` is a range (`127.0.0.0/8`): its listener is the
//! port's wildcard one with a chain matching the range (an address with a prefix
//! length would be a listener address Envoy rejects); connections to any address in
//! the range reach the entry's endpoint.

use crate::SERIAL;
use crate::backend::tcp::exchange;
use crate::backend::{Backend, TcpEcho};
use crate::harness::{Mesh, expect};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

fn service_entry(port: u16, endpoint_port: u16) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: ledger-range
  namespace: traffic
spec:
  hosts: [ledger.internal.test]
  addresses: [127.0.0.0/8]
  location: MESH_EXTERNAL
  resolution: STATIC
  ports:
  - {{number: {port}, name: tcp, protocol: TCP}}
  endpoints:
  - address: 127.0.0.1
    ports: {{tcp: {endpoint_port}}}
"#
    )
}

async fn echo(port: u16) -> Result<String, String> {
    exchange("127.0.0.1", port, "ping\n").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cidr_service_entry_matches_its_range() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let ledger = TcpEcho::start("ledger").await;
    let port = free_port();
    mesh.apply(
        "ledger-range.yaml",
        &service_entry(port, ledger.port()),
        "a connection in the range echoed by the entry's endpoint",
        async || {
            let got = echo(port).await?;
            expect(got == "ledger: ping\n", format!("echo {got:?}"))
        },
    )
    .await;
    for _ in 0..5 {
        assert_eq!(
            echo(port).await.as_deref(),
            Ok("ledger: ping\n"),
            "{}",
            mesh.logs()
        );
    }
    let listeners = mesh.config_dump("dynamic_listeners").await;
    assert!(
        listeners.contains("\"address_prefix\": \"127.0.0.0\""),
        "the range is a chain match: {listeners}"
    );
    mesh.finish().await;
}
