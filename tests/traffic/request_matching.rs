//! Request matching: a VirtualService's `match` conditions on headers, the URI (exact
//! and prefix), the method and query parameters each send requests to their own
//! subset; what matches none goes to the last, unconditional route.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use reqwest::Method;

const SUBSETS: [&str; 6] = ["header", "exact", "prefix", "method", "query", "fallback"];

const VIRTUAL_SERVICE: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: shop
  namespace: traffic
spec:
  hosts: [shop.traffic.svc.cluster.local]
  http:
  - name: gold-customers
    match: [{headers: {x-tier: {exact: gold}}}]
    route: [{destination: {host: shop, subset: header}}]
  - name: exact-path
    match: [{uri: {exact: /exact}}]
    route: [{destination: {host: shop, subset: exact}}]
  - name: api-prefix
    match: [{uri: {prefix: /api/}}]
    route: [{destination: {host: shop, subset: prefix}}]
  - name: writes
    match: [{method: {exact: POST}}]
    route: [{destination: {host: shop, subset: method}}]
  - name: debug-query
    match: [{queryParams: {debug: {exact: "1"}}}]
    route: [{destination: {host: shop, subset: query}}]
  - name: everything-else
    route: [{destination: {host: shop, subset: fallback}}]
"#;

fn destination_rule() -> String {
    let subsets: String = SUBSETS
        .iter()
        .map(|s| format!("  - {{name: {s}, labels: {{version: {s}}}}}\n"))
        .collect();
    format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata:\n  name: shop\n  namespace: traffic\nspec:\n  host: shop\n  subsets:\n{subsets}"
    )
}

/// A request and the backend that must answer it.
struct Case {
    method: Method,
    path: &'static str,
    header: Option<(&'static str, &'static str)>,
    expected: &'static str,
}

impl Case {
    fn new(
        method: Method,
        path: &'static str,
        header: Option<(&'static str, &'static str)>,
        expected: &'static str,
    ) -> Case {
        Case {
            method,
            path,
            header,
            expected,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matches_on_header_uri_method_and_query_pick_their_subsets() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
    let mut backends = Vec::new();
    for subset in SUBSETS {
        backends.push(HttpBackend::start(&format!("shop-{subset}")).await);
    }
    let workloads: Vec<_> = backends
        .iter()
        .zip(SUBSETS)
        .map(|(b, subset)| b.workload(subset))
        .collect();
    let port = free_port();
    let host = fqdn("shop", CLIENT_NS);
    mesh.write(
        "shop.yaml",
        &workloads::service(CLIENT_NS, "shop", "http", port, &workloads),
    );
    mesh.write("shop-rule.yaml", &destination_rule());
    mesh.apply(
        "shop-route.yaml",
        VIRTUAL_SERVICE,
        "x-tier: gold routed to shop-header",
        async || {
            let r = mesh
                .send(
                    mesh.request(Method::GET, port, &host, "/")
                        .header("x-tier", "gold"),
                )
                .await?;
            expect(r.backend() == Some("shop-header"), r)
        },
    )
    .await;

    let gold = Some(("x-tier", "gold"));
    let silver = Some(("x-tier", "silver"));
    let cases = [
        Case::new(Method::GET, "/", gold, "shop-header"),
        Case::new(Method::GET, "/", silver, "shop-fallback"),
        Case::new(Method::GET, "/exact", None, "shop-exact"),
        Case::new(Method::GET, "/exact/more", None, "shop-fallback"),
        Case::new(Method::GET, "/api/items", None, "shop-prefix"),
        Case::new(Method::GET, "/api", None, "shop-fallback"),
        Case::new(Method::POST, "/", None, "shop-method"),
        Case::new(Method::PUT, "/", None, "shop-fallback"),
        Case::new(Method::GET, "/?debug=1", None, "shop-query"),
        Case::new(Method::GET, "/items?page=2&debug=1", None, "shop-query"),
        Case::new(Method::GET, "/?debug=2", None, "shop-fallback"),
        Case::new(Method::GET, "/", None, "shop-fallback"),
    ];
    for case in cases {
        let mut request = mesh.request(case.method.clone(), port, &host, case.path);
        if let Some((name, value)) = case.header {
            request = request.header(name, value);
        }
        let r = mesh.must_send(request).await;
        assert_eq!(
            (r.status, r.backend()),
            (200, Some(case.expected)),
            "{} {} with header {:?}: expected {}, got {r}\n{}",
            case.method,
            case.path,
            case.header,
            case.expected,
            mesh.logs()
        );
    }
    // Envoy forwards what it matched on unchanged.
    let writes = backends[3].received();
    assert!(
        !writes.is_empty() && writes.iter().all(|r| r.method == "POST"),
        "shop-method should have received only POSTs: {writes:?}"
    );
    let queries = backends[4].received();
    assert!(
        queries.iter().any(|r| r.path == "/items?page=2&debug=1"),
        "shop-query should have received the query string: {queries:?}"
    );
    mesh.finish().await;
}
