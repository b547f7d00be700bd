use super::*;
use crate::xds::clusters::inbound::tests::{WORKLOAD, workload_mesh};
use crate::xds::testing::generate;
use crate::xds::types::LISTENER;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::Chunk;

fn virtual_inbound(p: &Proxy, push: &PushContext) -> Listener {
    generate::<Listener>(LISTENER, p, push, &[])
        .into_iter()
        .find(|l| l.name == "virtualInbound")
        .expect("virtualInbound")
}

/// (destination port, transport, ALPNs, terminates TLS) of each chain, in order.
fn chains(l: &Listener) -> Vec<(Option<u32>, String, Vec<String>, bool)> {
    l.filter_chains
        .iter()
        .map(|c| {
            let m = c.filter_chain_match.clone().unwrap_or_default();
            (
                m.destination_port.map(|p| p.value),
                m.transport_protocol,
                m.application_protocols,
                c.transport_socket.is_some(),
            )
        })
        .collect()
}

fn listener_filters(l: &Listener) -> Vec<String> {
    l.listener_filters.iter().map(|f| f.name.clone()).collect()
}

/// The workload mesh with a PeerAuthentication of `mode` in `app`.
fn with_mode(mode: &str) -> PushContext {
    let base = workload_mesh();
    let mut app = (**base.namespace("app").unwrap()).clone();
    app.peer_authentications
        .push(peer_authentication("app", mode));
    base.with_changes(2, [Chunk::Namespace(app)], [])
}

fn on_port(l: &Listener, port: u32) -> Vec<(String, Vec<String>, bool)> {
    chains(l)
        .into_iter()
        .filter(|c| c.0 == Some(port))
        .map(|c| (c.1, c.2, c.3))
        .collect()
}

fn s(v: &str) -> String {
    v.to_string()
}

#[test]
fn permissive_accepts_mesh_mtls_and_plaintext_told_apart_by_the_tls_inspector() {
    let p = meshed("app", WORKLOAD, InterceptionMode::Redirect);
    let vi = virtual_inbound(&p, &workload_mesh());
    assert_eq!(
        listener_filters(&vi),
        [
            "envoy.filters.listener.original_dst",
            "envoy.filters.listener.tls_inspector",
            "envoy.filters.listener.http_inspector"
        ]
    );
    // HTTP 8080: mTLS then plaintext. Sniffed 9000: the mTLS HTTP chain matches Istio's
    // ALPNs, the plaintext one the inspector's.
    assert_eq!(
        on_port(&vi, 8080),
        [(s("tls"), vec![], true), (s("raw_buffer"), vec![], false)]
    );
    let istio_http = vec![s("istio-http/1.0"), s("istio-http/1.1"), s("istio-h2")];
    assert_eq!(
        on_port(&vi, 9000),
        [
            (s("tls"), istio_http, true),
            (s("tls"), vec![], true),
            (s("raw_buffer"), vec![s("http/1.1"), s("h2c")], false),
            (s("raw_buffer"), vec![], false),
        ]
    );
    // The TLS context: the workload certificate over SDS, a client certificate required.
    let tls_chain = vi
        .filter_chains
        .iter()
        .find(|c| c.transport_socket.is_some())
        .unwrap();
    let ctx = downstream(tls_chain.transport_socket.as_ref().unwrap());
    assert_eq!(ctx.require_client_certificate.map(|b| b.value), Some(true));
    let (certs, root, sans) = sds_names(ctx.common_tls_context.as_ref().unwrap());
    assert_eq!((certs, root), (vec![s("default")], s("ROOTCA")));
    assert!(sans.is_empty(), "any workload the root signed may call");
}

#[test]
fn strict_accepts_mtls_only_and_disable_plaintext_only() {
    let p = meshed("app", WORKLOAD, InterceptionMode::Redirect);
    let strict = virtual_inbound(&p, &with_mode("STRICT"));
    assert!(
        chains(&strict)
            .iter()
            .filter(|c| c.0 != Some(15006))
            .all(|c| c.1 == "tls" && c.3),
        "{:?}",
        chains(&strict)
    );
    let disabled = virtual_inbound(&p, &with_mode("DISABLE"));
    assert!(chains(&disabled).iter().all(|c| c.1 != "tls" && !c.3));
    assert!(!listener_filters(&disabled).contains(&s("envoy.filters.listener.tls_inspector")));
}

#[test]
fn a_workload_without_the_mesh_identity_is_plaintext_unless_strict() {
    let p = proxy("app", WORKLOAD, InterceptionMode::Redirect);
    let permissive = virtual_inbound(&p, &workload_mesh());
    assert!(chains(&permissive).iter().all(|c| c.1 != "tls"));
    // STRICT refuses plaintext even so: nothing reaches the workload in the clear.
    let strict = virtual_inbound(&p, &with_mode("STRICT"));
    assert!(on_port(&strict, 8080).iter().all(|c| c.0 == "tls"));
}
