//! Consistent hash algorithms: Maglev (`maglev.tableSize`) and a ring hash
//! (`ringHash.minimumRingSize`) both keep each value of the hashed header on one
//! endpoint and spread the values; Envoy's config shows the algorithm asked for.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use std::collections::{BTreeMap, BTreeSet};

fn destination_rule(algorithm: &str) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: carts
  namespace: traffic
spec:
  host: carts
  trafficPolicy:
    loadBalancer:
      consistentHash:
        httpHeaderName: x-user
        {algorithm}
"#
    )
}

const USERS: [&str; 8] = [
    "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi",
];
const REQUESTS_PER_USER: usize = 15;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maglev_and_ring_hash_pin_each_header_value() {
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
    let get_as = async |user: &str| {
        let request = mesh
            .request(reqwest::Method::GET, port, &host, "/")
            .header("x-user", user);
        mesh.send(request).await
    };
    for (algorithm, policy) in [
        ("maglev: {tableSize: 65537}", "MAGLEV"),
        ("ringHash: {minimumRingSize: 2048}", "RING_HASH"),
    ] {
        mesh.apply(
            "carts-rule.yaml",
            &destination_rule(algorithm),
            &format!("the cluster balanced by {policy}"),
            async || {
                let dump = mesh.config_dump("dynamic_active_clusters").await;
                expect(
                    dump.contains(&format!("\"lb_policy\": \"{policy}\"")),
                    format!("no {policy} cluster yet"),
                )?;
                // And the listener in place (it comes after the clusters).
                get_as("probe").await?.served_by().map(|_| ())
            },
        )
        .await;
        let mut endpoint_of: BTreeMap<&str, String> = BTreeMap::new();
        for user in USERS {
            let mut seen = BTreeSet::new();
            for _ in 0..REQUESTS_PER_USER {
                let reply = get_as(user)
                    .await
                    .unwrap_or_else(|e| panic!("{e}\n{}", mesh.logs()));
                seen.insert(
                    reply
                        .served_by()
                        .unwrap_or_else(|e| panic!("{e}"))
                        .to_string(),
                );
            }
            assert_eq!(seen.len(), 1, "{policy}: x-user {user} reached {seen:?}");
            endpoint_of.insert(user, seen.into_iter().next().unwrap_or_default());
        }
        let used: BTreeSet<&String> = endpoint_of.values().collect();
        assert!(
            used.len() > 1,
            "{policy}: every user on one endpoint: {endpoint_of:?}"
        );
        println!("{policy}: {endpoint_of:?}");
    }
    mesh.finish().await;
}
