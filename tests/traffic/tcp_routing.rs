//! TCP routing: a VirtualService `tcp` route sends the connections of a TCP port
//! (named `tcp-...`) to the subset it names.

use crate::SERIAL;
use crate::backend::tcp::exchange;
use crate::backend::{Backend, TcpEcho};
use crate::harness::{CLIENT_NS, Mesh, expect, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

const DESTINATION_RULE: &str = r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: ledger-db
  namespace: traffic
spec:
  host: ledger-db
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
"#;

fn virtual_service(subset: &str) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: ledger-db
  namespace: traffic
spec:
  hosts: [ledger-db]
  tcp:
  - route:
    - destination: {{host: ledger-db, subset: {subset}}}
"#
    )
}

/// Opens a connection to Envoy's listener on `port`, sends a line and returns the
/// echo: `<backend>: <line>`.
async fn echo(port: u16, line: &str) -> Result<String, String> {
    exchange("127.0.0.1", port, line).await
}

/// `count` connections in a row all echoed by `backend`.
async fn all_reach(port: u16, backend: &str, count: usize) -> Result<(), String> {
    for n in 0..count {
        let got = echo(port, "ping\n").await?;
        expect(
            got == format!("{backend}: ping\n"),
            format!("connection {n}: {got:?}, expected {backend}"),
        )?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_route_sends_connections_to_the_named_subset() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let v1 = TcpEcho::start("ledger-db-v1").await;
    let v2 = TcpEcho::start("ledger-db-v2").await;
    let port = free_port();
    mesh.write(
        "ledger-db.yaml",
        &workloads::service(
            CLIENT_NS,
            "ledger-db",
            "tcp-postgres",
            port,
            &[v1.workload("v1"), v2.workload("v2")],
        ),
    );
    mesh.write("ledger-db-rule.yaml", DESTINATION_RULE);
    // The default route balances over both: 10 connections in a row to v1 show the
    // route in place.
    mesh.apply(
        "ledger-db-route.yaml",
        &virtual_service("v1"),
        "10 connections in a row to ledger-db-v1",
        async || all_reach(port, v1.name(), 10).await,
    )
    .await;
    mesh.apply(
        "ledger-db-route.yaml",
        &virtual_service("v2"),
        "a connection to ledger-db-v2 after the route moved",
        async || all_reach(port, v2.name(), 1).await,
    )
    .await;
    if let Err(e) = all_reach(port, v2.name(), 20).await {
        panic!(
            "after the move every connection should reach v2: {e}\n{}",
            mesh.logs()
        );
    }
    mesh.finish().await;
}
