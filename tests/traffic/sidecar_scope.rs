//! Sidecar egress scope: a Sidecar listing only its own namespace's hosts (`./*`) hides
//! the services of other namespaces from its proxies, and keeps its own.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

const OTHER_NS: &str = "other";

const SIDECAR: &str = r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata:
  name: default
  namespace: traffic
spec:
  egress:
  - hosts: ["./*"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecar_egress_hides_the_services_of_other_namespaces() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let home = HttpBackend::start("home-v1").await;
    let away = HttpBackend::start("away-v1").await;
    // Distinct ports: hidden `away` then has no listener at all (a shared port would
    // keep a listener whose catch-all passes unknown hosts through).
    let (home_port, away_port) = (free_port(), free_port());
    let (home_host, away_host) = (fqdn("home", CLIENT_NS), fqdn("away", OTHER_NS));
    mesh.write(
        "home.yaml",
        &workloads::service(CLIENT_NS, "home", "http", home_port, &[home.workload("v1")]),
    );
    mesh.write("other-namespace.yaml", &workloads::namespace(OTHER_NS));
    mesh.write(
        "other/away.yaml",
        &workloads::service(OTHER_NS, "away", "http", away_port, &[away.workload("v1")]),
    );
    mesh.eventually("both namespaces' services served", async || {
        mesh.get(home_port, &home_host, "/").await?.served_by()?;
        mesh.get(away_port, &away_host, "/")
            .await?
            .served_by()
            .map(|_| ())
    })
    .await;

    mesh.apply(
        "sidecar.yaml",
        SIDECAR,
        "the other namespace's service unreachable",
        async || match mesh.get(away_port, &away_host, "/").await {
            Err(_no_answer) => Ok(()),
            Ok(r) => expect(matches!(r.status, 404 | 502), r),
        },
    )
    .await;
    // Hidden for good, not a blip while listeners change.
    for _ in 0..5 {
        let r = mesh.get(away_port, &away_host, "/").await;
        assert!(
            r.as_ref().is_err() || r.as_ref().is_ok_and(|r| r.backend().is_none()),
            "{away_host} is outside the Sidecar's egress hosts, yet: {r:?}"
        );
    }
    let r = mesh.must_get(home_port, &home_host, "/").await;
    assert_eq!(
        r.served_by(),
        Ok("home-v1"),
        "the client's own namespace stays visible\n{}",
        mesh.logs()
    );
    mesh.finish().await;
}
