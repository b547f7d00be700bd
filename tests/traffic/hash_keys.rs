//! The other consistent-hash keys: `httpQueryParameterName` pins each value of a query
//! parameter to one endpoint; `useSourceIp` pins one client (here every request comes
//! from 127.0.0.1) to one endpoint.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use std::collections::{BTreeMap, BTreeSet};

fn destination_rule(key: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata:\n  name: carts\n  namespace: traffic\nspec:\n  host: carts\n  trafficPolicy:\n    loadBalancer:\n      consistentHash: {{{key}}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_parameter_and_source_ip_hashing_stick() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
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
    // By query parameter: each user's 20 requests in a row on one endpoint.
    let mut by_user: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    mesh.apply(
        "carts-rule.yaml",
        &destination_rule("httpQueryParameterName: user"),
        "each user's requests on one endpoint",
        async || {
            by_user.clear();
            for user in ["alice", "bob", "carol", "dave", "erin", "frank"] {
                for _ in 0..20 {
                    let r = mesh.get(port, &host, &format!("/cart?user={user}")).await?;
                    let by = r.served_by()?.to_string();
                    by_user.entry(user.to_string()).or_default().insert(by);
                }
            }
            expect(
                by_user.values().all(|s| s.len() == 1),
                format!("{by_user:?}"),
            )
        },
    )
    .await;
    let used: BTreeSet<&String> = by_user.values().flatten().collect();
    assert!(
        used.len() >= 2,
        "six users all on one endpoint: {by_user:?}"
    );

    // By source IP: one client, one endpoint.
    let mut served: BTreeSet<String> = BTreeSet::new();
    mesh.apply(
        "carts-rule.yaml",
        &destination_rule("useSourceIp: true"),
        "60 requests from one client on one endpoint",
        async || {
            served.clear();
            for n in 0..60 {
                let r = mesh.get(port, &host, &format!("/cart?n={n}")).await?;
                served.insert(r.served_by()?.to_string());
            }
            expect(served.len() == 1, format!("{served:?}"))
        },
    )
    .await;
    mesh.finish().await;
}
