//! Consistent hashing: with `consistentHash.httpHeaderName`, every request carrying one
//! value of the header lands on the same endpoint, and the values spread over several.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use std::collections::{BTreeMap, BTreeSet};

const DESTINATION_RULE: &str = r#"apiVersion: networking.istio.io/v1
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
"#;

const USERS: [&str; 10] = [
    "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy",
];
const REQUESTS_PER_USER: usize = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consistent_hash_pins_each_user_to_one_endpoint() {
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
            .request(reqwest::Method::GET, port, &host, "/cart")
            .header("x-user", user);
        mesh.send(request).await
    };
    // Until hashing is in place the default balancer spreads one user's requests:
    // 20 in a row on one of 3 endpoints happen by chance once in 3^19.
    mesh.apply(
        "carts-rule.yaml",
        DESTINATION_RULE,
        "20 requests of one user on one endpoint",
        async || {
            let mut seen = BTreeSet::new();
            for _ in 0..20 {
                seen.insert(get_as("probe").await?.served_by()?.to_string());
            }
            expect(seen.len() == 1, format!("one user reached {seen:?}"))
        },
    )
    .await;

    let mut endpoint_of: BTreeMap<&str, String> = BTreeMap::new();
    for user in USERS {
        let mut seen = BTreeSet::new();
        for _ in 0..REQUESTS_PER_USER {
            let r = get_as(user)
                .await
                .unwrap_or_else(|e| panic!("{e}\n{}", mesh.logs()));
            let backend = r
                .served_by()
                .unwrap_or_else(|e| panic!("{e}\n{}", mesh.logs()));
            seen.insert(backend.to_string());
        }
        assert_eq!(
            seen.len(),
            1,
            "{REQUESTS_PER_USER} requests with x-user: {user} reached {seen:?}, expected one endpoint"
        );
        endpoint_of.insert(user, seen.into_iter().next().unwrap_or_default());
    }
    let used: BTreeSet<&String> = endpoint_of.values().collect();
    assert!(
        used.len() > 1,
        "{} users all hashed to one endpoint: {endpoint_of:?}",
        USERS.len()
    );
    println!("consistent hash: {endpoint_of:?}");
    mesh.finish().await;
}
