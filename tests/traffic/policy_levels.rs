//! Where a DestinationRule's policy applies: `portLevelSettings` on its port, and a
//! subset's own `trafficPolicy` on traffic routed to that subset only. Consistent hashing
//! on `x-user` shows which policy a request got: sticky, or spread by round robin.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, Reply, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use std::collections::{BTreeMap, BTreeSet};

const HASH: &str = "{loadBalancer: {consistentHash: {httpHeaderName: x-user}}}";

fn port_level(port: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata:\n  name: carts\n  namespace: traffic\nspec:\n  host: carts\n  trafficPolicy:\n    portLevelSettings:\n    - port: {{number: {port}}}\n      {}\n",
        &HASH[1..HASH.len() - 1]
    )
}

fn subset_level() -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata:\n  name: carts\n  namespace: traffic\nspec:\n  host: carts\n  subsets:\n  - name: sticky\n    labels: {{version: v1}}\n    trafficPolicy: {HASH}\n"
    )
}

const TO_STICKY: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: carts
  namespace: traffic
spec:
  hosts: [carts]
  http:
  - match: [{headers: {x-subset: {exact: sticky}}}]
    route: [{destination: {host: carts, subset: sticky}}]
  - route: [{destination: {host: carts}}]
"#;

/// The endpoints each of six users reached in 15 requests each.
async fn spread(
    mesh: &Mesh,
    port: u16,
    host: &str,
    extra: Option<(&str, &str)>,
) -> Result<BTreeMap<String, BTreeSet<String>>, String> {
    let mut by_user: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for user in ["alice", "bob", "carol", "dave", "erin", "frank"] {
        for _ in 0..15 {
            let mut request = mesh
                .request(reqwest::Method::GET, port, host, "/")
                .header("x-user", user);
            if let Some((k, v)) = extra {
                request = request.header(k, v);
            }
            let r: Reply = mesh.send(request).await?;
            let by = r.served_by()?.to_string();
            by_user.entry(user.into()).or_default().insert(by);
        }
    }
    Ok(by_user)
}

fn sticky(by_user: &BTreeMap<String, BTreeSet<String>>) -> bool {
    by_user.values().all(|s| s.len() == 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_level_and_subset_policies_apply_where_they_say() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
    let mut backends = Vec::new();
    for n in 1..=3 {
        backends.push(HttpBackend::start(&format!("carts-{n}")).await);
    }
    let workloads: Vec<_> = backends.iter().map(|b| b.workload("v1")).collect();
    let port = free_port();
    let host = fqdn("carts", CLIENT_NS);
    mesh.write(
        "carts.yaml",
        &workloads::service(CLIENT_NS, "carts", "http", port, &workloads),
    );
    mesh.apply(
        "carts-rule.yaml",
        &port_level(port),
        "the port's hashing pinning each user",
        async || {
            let by_user = spread(&mesh, port, &host, None).await?;
            expect(sticky(&by_user), format!("{by_user:?}"))
        },
    )
    .await;

    // The subset's policy: sticky through the subset, round robin around it.
    mesh.write("carts-route.yaml", TO_STICKY);
    mesh.apply(
        "carts-rule.yaml",
        &subset_level(),
        "round robin outside the subset",
        async || {
            let by_user = spread(&mesh, port, &host, None).await?;
            expect(!sticky(&by_user), format!("{by_user:?}"))
        },
    )
    .await;
    let through_subset = spread(&mesh, port, &host, Some(("x-subset", "sticky")))
        .await
        .expect("answers");
    assert!(
        sticky(&through_subset),
        "the subset's hashing did not apply: {through_subset:?}\n{}",
        mesh.logs()
    );
    mesh.finish().await;
}
