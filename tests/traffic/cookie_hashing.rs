//! Cookie stickiness: with `consistentHash.httpCookie` and a `ttl`, the first response
//! sets the cookie, and every later request carrying it lands on the endpoint the first
//! one did; fresh sessions spread over both endpoints.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, Reply, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use std::collections::BTreeSet;

const COOKIE: &str = "shoal-session";

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
        httpCookie: {name: shoal-session, path: /, ttl: 3600s}
"#;

const SESSIONS: usize = 12;
const REQUESTS_PER_SESSION: usize = 15;

/// `name=value` of the session cookie a response sets.
fn session_cookie(reply: &Reply) -> Result<String, String> {
    reply
        .headers
        .iter()
        .filter(|(k, _)| k == "set-cookie")
        .find_map(|(_, v)| {
            let pair = v.split(';').next()?.trim();
            pair.starts_with(&format!("{COOKIE}="))
                .then(|| pair.to_string())
        })
        .ok_or_else(|| format!("no {COOKIE} cookie set: {reply}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_cookie_sticks_to_one_endpoint() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
    let backends = [
        HttpBackend::start("carts-1").await,
        HttpBackend::start("carts-2").await,
    ];
    let workloads: Vec<_> = backends.iter().map(|b| b.workload("v1")).collect();
    let port = free_port();
    let host = fqdn("carts", CLIENT_NS);
    mesh.write(
        "carts.yaml",
        &workloads::service(CLIENT_NS, "carts", "http", port, &workloads),
    );
    mesh.eventually("the service routed", async || {
        let reply = mesh.get(port, &host, "/").await?;
        reply.served_by()?;
        // Without the rule nothing sets a cookie.
        expect(session_cookie(&reply).is_err(), &reply)
    })
    .await;
    mesh.apply(
        "carts-rule.yaml",
        DESTINATION_RULE,
        "a response setting the session cookie",
        async || session_cookie(&mesh.get(port, &host, "/").await?).map(|_| ()),
    )
    .await;

    let mut used = BTreeSet::new();
    for _ in 0..SESSIONS {
        let first = mesh.must_get(port, &host, "/").await;
        let cookie = session_cookie(&first).unwrap_or_else(|e| panic!("{e}\n{}", mesh.logs()));
        let pinned = first
            .served_by()
            .unwrap_or_else(|e| panic!("{e}"))
            .to_string();
        for _ in 0..REQUESTS_PER_SESSION {
            let request = mesh
                .request(reqwest::Method::GET, port, &host, "/")
                .header("cookie", &cookie);
            let reply = mesh.must_send(request).await;
            let served = reply.served_by().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(served, pinned, "{cookie} left its endpoint: {reply}");
            assert!(
                session_cookie(&reply).is_err(),
                "a request with the cookie got a new one: {reply}"
            );
        }
        used.insert(pinned);
    }
    assert_eq!(used.len(), 2, "{SESSIONS} sessions all pinned to {used:?}");
    mesh.finish().await;
}
