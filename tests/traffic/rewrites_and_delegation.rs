//! What a route does to a request on its way: `rewrite` (`uri`, `authority`,
//! `uriRegexRewrite`) as the backend receives it; a `redirect` changing `scheme` and
//! `port`; and a `delegate` route handing a path prefix to another VirtualService.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;

const VIRTUAL_SERVICES: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: shop
  namespace: traffic
spec:
  hosts: [shop]
  http:
  - match: [{uri: {prefix: /old/}}]
    rewrite: {uri: /new/, authority: rewritten.example}
    route: [{destination: {host: shop}}]
  - match: [{uri: {prefix: /regex/}}]
    rewrite: {uriRegexRewrite: {match: "^/regex/([a-z]+)/(.*)$", rewrite: "/\\2/\\1"}}
    route: [{destination: {host: shop}}]
  - match: [{uri: {prefix: /secure}}]
    redirect: {scheme: https, port: 8443}
  - match: [{uri: {prefix: /team/}}]
    delegate: {name: team-routes, namespace: traffic}
  - route: [{destination: {host: shop}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: team-routes
  namespace: traffic
spec:
  http:
  - match: [{uri: {prefix: /team/a}}]
    headers: {request: {set: {x-delegated: team-a}}}
    route: [{destination: {host: shop}}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewrites_redirects_and_delegated_routes_reach_the_backend_as_written() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
    let shop = HttpBackend::start("shop-v1").await;
    let port = free_port();
    let host = fqdn("shop", CLIENT_NS);
    mesh.write(
        "shop.yaml",
        &workloads::service(CLIENT_NS, "shop", "http", port, &[shop.workload("v1")]),
    );
    mesh.apply(
        "shop-route.yaml",
        VIRTUAL_SERVICES,
        "/old/ rewritten to /new/",
        async || {
            shop.clear_received();
            let r = mesh.get(port, &host, "/old/items").await?;
            let seen = shop.received();
            expect(
                r.status == 200 && seen.iter().any(|q| q.path == "/new/items"),
                format!("{r}; backend saw {seen:?}"),
            )
        },
    )
    .await;
    let seen = shop.received();
    let last = seen.last().expect("a request");
    assert_eq!(last.header("host"), Some("rewritten.example"), "{last:?}");

    shop.clear_received();
    let r = mesh.must_get(port, &host, "/regex/books/42").await;
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(shop.received()[0].path, "/42/books");

    let r = mesh.must_get(port, &host, "/secure/login").await;
    assert_eq!(r.status, 301, "{r}");
    let location = r.header("location").unwrap_or_default();
    assert!(
        location.starts_with("https://") && location.contains(":8443/secure/login"),
        "{r}"
    );

    // Delegated: the child's route applies under the parent's prefix; what the child
    // does not match falls through to the parent's next route, as Istio flattens them.
    shop.clear_received();
    let r = mesh.must_get(port, &host, "/team/a/x").await;
    assert_eq!(r.served_by(), Ok("shop-v1"), "{r}");
    assert_eq!(shop.received()[0].header("x-delegated"), Some("team-a"));
    shop.clear_received();
    let r = mesh.must_get(port, &host, "/team/b").await;
    assert_eq!(r.served_by(), Ok("shop-v1"), "{r}");
    assert_eq!(shop.received()[0].header("x-delegated"), None);
    mesh.finish().await;
}
