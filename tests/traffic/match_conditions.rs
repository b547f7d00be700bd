//! The rest of a route match's conditions, each deciding between its own subset and the
//! fallback: `withoutHeaders`, `authority`, `ignoreUriCase`, `sourceLabels` and
//! `sourceNamespace` (the client sidecar's own labels and namespace), and `port`.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use reqwest::Method;

const SUBSETS: [&str; 6] = [
    "without",
    "authority",
    "nocase",
    "source",
    "port",
    "fallback",
];

fn virtual_service(port: u16) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: shop
  namespace: traffic
spec:
  hosts: [shop]
  http:
  - match: [{{headers: {{x-case: {{exact: without}}}}, withoutHeaders: {{x-block: {{}}}}}}]
    route: [{{destination: {{host: shop, subset: without}}}}]
  - match: [{{headers: {{x-case: {{exact: authority}}}}, authority: {{exact: shop.traffic}}}}]
    route: [{{destination: {{host: shop, subset: authority}}}}]
  - match: [{{uri: {{exact: /CaseLess}}, ignoreUriCase: true}}]
    route: [{{destination: {{host: shop, subset: nocase}}}}]
  - match: [{{headers: {{x-case: {{exact: source}}}}, sourceLabels: {{app: client}}, sourceNamespace: traffic}}]
    route: [{{destination: {{host: shop, subset: source}}}}]
  - match: [{{headers: {{x-case: {{exact: other-source}}}}, sourceLabels: {{app: someone-else}}}}]
    route: [{{destination: {{host: shop, subset: source}}}}]
  - match: [{{headers: {{x-case: {{exact: port}}}}, port: {port}}}]
    route: [{{destination: {{host: shop, subset: port}}}}]
  - match: [{{headers: {{x-case: {{exact: other-port}}}}, port: 1}}]
    route: [{{destination: {{host: shop, subset: port}}}}]
  - route: [{{destination: {{host: shop, subset: fallback}}}}]
"#
    )
}

fn destination_rule() -> String {
    let subsets: String = SUBSETS
        .iter()
        .map(|s| format!("  - {{name: {s}, labels: {{version: {s}}}}}\n"))
        .collect();
    format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata:\n  name: shop\n  namespace: traffic\nspec:\n  host: shop\n  subsets:\n{subsets}"
    )
}

/// (Host, path, headers, the backend that must answer).
type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a str);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_headers_authority_case_source_and_port_conditions_pick_their_subsets() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Sotw).await;
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
    let fqdn = fqdn("shop", CLIENT_NS);
    mesh.write(
        "shop.yaml",
        &workloads::service(CLIENT_NS, "shop", "http", port, &workloads),
    );
    mesh.write("shop-rule.yaml", &destination_rule());
    let request = |host: &str, path: &str, headers: &[(&str, &str)]| {
        let mut r = mesh.request(Method::GET, port, host, path);
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        r
    };
    mesh.apply(
        "shop-route.yaml",
        &virtual_service(port),
        "/caseless routed to shop-nocase",
        async || {
            let r = mesh.send(request(&fqdn, "/caseless", &[])).await?;
            expect(r.backend() == Some("shop-nocase"), r)
        },
    )
    .await;
    let cases: [Case<'_>; 12] = [
        (&fqdn, "/", &[("x-case", "without")], "shop-without"),
        (
            &fqdn,
            "/",
            &[("x-case", "without"), ("x-block", "1")],
            "shop-fallback",
        ),
        (
            "shop.traffic",
            "/",
            &[("x-case", "authority")],
            "shop-authority",
        ),
        (&fqdn, "/", &[("x-case", "authority")], "shop-fallback"),
        (&fqdn, "/CASELESS", &[], "shop-nocase"),
        (&fqdn, "/caseless/more", &[], "shop-fallback"),
        (&fqdn, "/", &[("x-case", "source")], "shop-source"),
        (&fqdn, "/", &[("x-case", "other-source")], "shop-fallback"),
        (&fqdn, "/", &[("x-case", "port")], "shop-port"),
        (&fqdn, "/", &[("x-case", "other-port")], "shop-fallback"),
        (&fqdn, "/", &[("x-case", "none")], "shop-fallback"),
        (&fqdn, "/", &[], "shop-fallback"),
    ];
    for (host, path, headers, expected) in cases {
        let r = mesh.must_send(request(host, path, headers)).await;
        assert_eq!(
            (r.status, r.backend()),
            (200, Some(expected)),
            "{host}{path} with {headers:?}: expected {expected}, got {r}\n{}",
            mesh.logs()
        );
    }
    mesh.finish().await;
}
