//! Sidecar `outboundTrafficPolicy.egressProxy`: with ALLOW_ANY, traffic to hosts the
//! mesh does not know goes to the egress proxy's service instead of passing through,
//! while known hosts keep their routes.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

fn sidecar(proxy_port: u16) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata:
  name: default
  namespace: traffic
spec:
  outboundTrafficPolicy:
    mode: ALLOW_ANY
    egressProxy:
      host: egress-gw.traffic.svc.cluster.local
      port: {{number: {proxy_port}}}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_hosts_go_to_the_egress_proxy() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
    let shop = HttpBackend::start("shop-v1").await;
    let gateway = HttpBackend::start("egress-gw-v1").await;
    let (port, proxy_port) = (free_port(), free_port());
    let host = fqdn("shop", CLIENT_NS);
    mesh.write(
        "shop.yaml",
        &workloads::service(CLIENT_NS, "shop", "http", port, &[shop.workload("v1")]),
    );
    mesh.write(
        "egress-gw.yaml",
        &workloads::service(
            CLIENT_NS,
            "egress-gw",
            "http",
            proxy_port,
            &[gateway.workload("v1")],
        ),
    );
    mesh.apply(
        "sidecar.yaml",
        &sidecar(proxy_port),
        "an unknown host served by the egress proxy",
        async || {
            let r = mesh.get(port, "unknown.example.com", "/pay").await?;
            expect(r.served_by()? == gateway.name(), format!("{r}"))
        },
    )
    .await;
    for _ in 0..5 {
        let r = mesh.must_get(port, "unknown.example.com", "/pay").await;
        assert_eq!(r.served_by(), Ok(gateway.name()));
        let r = mesh.must_get(port, &host, "/").await;
        assert_eq!(
            r.served_by(),
            Ok(shop.name()),
            "a known host keeps its route"
        );
    }
    assert!(
        gateway
            .received()
            .iter()
            .all(|r| r.header("host") == Some("unknown.example.com")),
        "the egress proxy sees the client's host"
    );
    mesh.finish().await;
}
