//! Header manipulation: a VirtualService's `headers` sets, adds and removes request
//! headers on the way to the backend and response headers on the way back, for a
//! whole route or per weighted destination.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, Mesh, expect, fqdn, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use reqwest::Method;

const DESTINATION_RULE: &str = r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: profile
  namespace: traffic
spec:
  host: profile
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
"#;

const VIRTUAL_SERVICE: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: profile
  namespace: traffic
spec:
  hosts: [profile]
  http:
  - name: split
    match: [{uri: {prefix: /split}}]
    route:
    - destination: {host: profile, subset: v1}
      weight: 50
      headers:
        request: {set: {x-destination: v1}}
        response: {set: {x-served-by: v1}}
    - destination: {host: profile, subset: v2}
      weight: 50
      headers:
        request: {set: {x-destination: v2}}
        response: {set: {x-served-by: v2}}
  - name: whole-route
    route: [{destination: {host: profile, subset: v1}}]
    headers:
      request:
        set: {x-set: by-mesh}
        add: {x-add: by-mesh}
        remove: [x-drop]
      response:
        set: {x-response-set: by-mesh}
        remove: [x-powered-by]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_are_set_added_and_removed_per_route_and_destination() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start(XdsApi::Delta).await;
    let v1 = HttpBackend::start("profile-v1").await;
    let v2 = HttpBackend::start("profile-v2").await;
    let port = free_port();
    let host = fqdn("profile", CLIENT_NS);
    mesh.write(
        "profile.yaml",
        &workloads::service(
            CLIENT_NS,
            "profile",
            "http",
            port,
            &[v1.workload("v1"), v2.workload("v2")],
        ),
    );
    mesh.write("profile-rule.yaml", DESTINATION_RULE);
    mesh.apply(
        "profile-route.yaml",
        VIRTUAL_SERVICE,
        "the response header the route sets",
        async || {
            let r = mesh.get(port, &host, "/").await?;
            expect(r.header("x-response-set") == Some("by-mesh"), r)
        },
    )
    .await;

    // Route level: what the backend received, and what the client got back.
    v1.clear_received();
    let r = mesh
        .must_send(
            mesh.request(Method::GET, port, &host, "/")
                .header("x-set", "by-client")
                .header("x-add", "by-client")
                .header("x-drop", "by-client"),
        )
        .await;
    assert_eq!(r.served_by(), Ok("profile-v1"));
    let received = v1.received().pop().expect("profile-v1 got the request");
    assert_eq!(
        received.header_values("x-set"),
        ["by-mesh"],
        "set replaces the client's value: {received:?}"
    );
    let mut added = received.header_values("x-add");
    added.sort_unstable();
    assert_eq!(
        added,
        ["by-client", "by-mesh"],
        "add keeps the client's value: {received:?}"
    );
    assert_eq!(
        received.header("x-drop"),
        None,
        "remove drops it: {received:?}"
    );
    assert_eq!(r.header("x-response-set"), Some("by-mesh"), "{r}");
    assert_eq!(r.header("x-powered-by"), None, "response remove: {r}");

    // Per destination of a weighted route: each destination's own headers.
    v1.clear_received();
    v2.clear_received();
    let mut seen = [0, 0];
    for _ in 0..40 {
        let r = mesh.must_get(port, &host, "/split").await;
        let subset = match r.served_by() {
            Ok("profile-v1") => "v1",
            Ok("profile-v2") => "v2",
            _ => panic!("unexpected answer on /split: {r}"),
        };
        seen[usize::from(subset == "v2")] += 1;
        assert_eq!(r.header("x-served-by"), Some(subset), "{r}");
    }
    assert!(
        seen[0] > 0 && seen[1] > 0,
        "the 50/50 split reached {seen:?}"
    );
    for (backend, subset) in [(&v1, "v1"), (&v2, "v2")] {
        for received in backend.received() {
            assert_eq!(
                received.header_values("x-destination"),
                [subset],
                "{} got another destination's headers: {received:?}",
                backend.name()
            );
        }
    }
    mesh.finish().await;
}
