use super::*;
use crate::xds::testing::{endpoint, generate, mesh, shop};
use crate::xds::types::{CLUSTER, ENDPOINT};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::google::protobuf::value::Kind;
use shoal_proto::config::istio::{ClientTlsSettings, DestinationRule, TrafficPolicy};
use shoal_proto::model::{NamespaceConfig, ServiceEndpoints};
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::Chunk;

const REVIEWS: &str = "outbound|9080||reviews.shop.svc.cluster.local";
const DB: &str = "outbound|5432||db.shop.svc.cluster.local";
const API: &str = "outbound|80||api.example.com";

fn clusters(p: &Proxy, push: &PushContext) -> Vec<Cluster> {
    generate(CLUSTER, p, push, &[])
}

fn find<'a>(cs: &'a [Cluster], name: &str) -> &'a Cluster {
    cs.iter().find(|c| c.name == name).unwrap_or_else(|| {
        panic!(
            "no cluster {name}: {:?}",
            cs.iter().map(|c| &c.name).collect::<Vec<_>>()
        )
    })
}

/// The test mesh with `shop` changed by `edit`.
fn with_shop(edit: impl FnOnce(&mut NamespaceConfig)) -> PushContext {
    let mut ns = shop();
    edit(&mut ns);
    mesh().with_changes(2, [Chunk::Namespace(ns)], [])
}

#[test]
fn auto_mtls_sends_the_mesh_mtls_to_sidecars_and_plaintext_to_the_rest() {
    let push = mesh();
    let cs = clusters(
        &meshed("shop", "10.1.0.5", InterceptionMode::Redirect),
        &push,
    );
    let reviews = find(&cs, REVIEWS);
    assert!(reviews.transport_socket.is_none());
    let [istio, disabled] = reviews.transport_socket_matches.as_slice() else {
        panic!(
            "two transport socket matches: {:?}",
            reviews.transport_socket_matches
        )
    };
    assert_eq!(istio.name, "tlsMode-istio");
    let wanted = &istio.r#match.as_ref().unwrap().fields["tlsMode"];
    assert_eq!(wanted.kind, Some(Kind::StringValue("istio".into())));
    let tls = upstream(istio.transport_socket.as_ref().unwrap());
    assert_eq!(tls.sni, REVIEWS, "the cluster is the SNI");
    let common = tls.common_tls_context.unwrap();
    assert_eq!(common.alpn_protocols, ["istio-http/1.1"]);
    let (certs, root, sans) = sds_names(&common);
    assert_eq!(certs, ["default"]);
    assert_eq!(root, "ROOTCA");
    assert_eq!(sans, ["spiffe://cluster.local/ns/shop/sa/reviews"]);
    let sds = common.tls_certificate_sds_secret_configs[0]
        .sds_config
        .as_ref()
        .unwrap();
    assert!(format!("{sds:?}").contains("sds-grpc"), "{sds:?}");
    assert_eq!(disabled.name, "tlsMode-disabled");
    assert_eq!(
        disabled.transport_socket.as_ref().unwrap().name,
        "envoy.transport_sockets.raw_buffer"
    );
    // TCP speaks Istio's TCP ALPN (see the next test); a mesh-external service gets no
    // mTLS.
    let db = find(&cs, DB);
    let db_tls = upstream(
        db.transport_socket_matches[0]
            .transport_socket
            .as_ref()
            .unwrap(),
    );
    assert_eq!(db_tls.common_tls_context.unwrap().alpn_protocols, ["istio"]);
    let api = find(&cs, API);
    assert!(api.transport_socket_matches.is_empty() && api.transport_socket.is_none());
}

/// A TCP cluster must not offer `istio-peer-exchange`: an istiod-served server (an
/// istio-proxy, whose inbound TCP chains offer it back) would then start Istio's metadata
/// exchange and write its header into the stream, which a Shoal sidecar cannot read and
/// would pass to its app. `istio` alone still matches istiod's inbound mTLS chains.
#[test]
fn tcp_mesh_mtls_offers_no_metadata_exchange_alpn() {
    let cs = clusters(
        &meshed("shop", "10.1.0.5", InterceptionMode::Redirect),
        &mesh(),
    );
    let db = find(&cs, DB);
    let tls = upstream(
        db.transport_socket_matches[0]
            .transport_socket
            .as_ref()
            .unwrap(),
    );
    let alpns = tls.common_tls_context.unwrap().alpn_protocols;
    assert!(
        !alpns.iter().any(|a| a == "istio-peer-exchange"),
        "{alpns:?}"
    );
    assert!(alpns.iter().any(|a| a == "istio"), "{alpns:?}");
}

#[test]
fn no_auto_mtls_from_a_proxy_without_identity_when_off_or_where_mtls_is_disabled() {
    let plain = clusters(
        &proxy("shop", "10.1.0.5", InterceptionMode::Redirect),
        &mesh(),
    );
    assert!(find(&plain, REVIEWS).transport_socket_matches.is_empty());

    let disabled = with_shop(|ns| {
        ns.peer_authentications
            .push(peer_authentication("shop", "DISABLE"))
    });
    let cs = clusters(
        &meshed("shop", "10.1.0.5", InterceptionMode::Redirect),
        &disabled,
    );
    assert!(find(&cs, REVIEWS).transport_socket_matches.is_empty());

    let off = with_shop(|ns| {
        ns.mesh_configs.push(NamedConfig {
            name: "istio".into(),
            namespace: "shop".into(),
            created: 0,
            spec: shoal_proto::config::mesh::MeshConfig {
                root_namespace: "shop".into(),
                enable_auto_mtls: Some(false),
                ..Default::default()
            },
        })
    });
    let cs = clusters(
        &meshed("shop", "10.1.0.5", InterceptionMode::Redirect),
        &off,
    );
    assert!(find(&cs, REVIEWS).transport_socket_matches.is_empty());
}

#[test]
fn a_destination_rule_istio_mutual_is_the_mesh_mtls_and_disable_is_plaintext() {
    let rule = |mode: &str, sans: Vec<String>| NamedConfig {
        name: "db".into(),
        namespace: "shop".into(),
        created: 0,
        spec: DestinationRule {
            host: "db.shop.svc.cluster.local".into(),
            traffic_policy: Some(TrafficPolicy {
                tls: Some(Box::new(ClientTlsSettings {
                    mode: Some(mode.into()),
                    subject_alt_names: sans,
                    ..Default::default()
                })),
                ..Default::default()
            }),
            ..Default::default()
        },
    };
    let named = vec!["spiffe://cluster.local/ns/shop/sa/postgres".to_string()];
    let explicit = with_shop(|ns| {
        ns.destination_rules
            .push(rule("ISTIO_MUTUAL", named.clone()))
    });
    // Explicit: even from a proxy without the label (it fails closed, never plaintext).
    let cs = clusters(
        &proxy("shop", "10.1.0.5", InterceptionMode::Redirect),
        &explicit,
    );
    let db = find(&cs, DB);
    assert!(db.transport_socket_matches.is_empty());
    let tls = upstream(db.transport_socket.as_ref().unwrap());
    let (_, _, sans) = sds_names(&tls.common_tls_context.unwrap());
    assert_eq!(sans, named, "the rule's SANs");

    let off = with_shop(|ns| ns.destination_rules.push(rule("DISABLE", vec![])));
    let cs = clusters(
        &meshed("shop", "10.1.0.5", InterceptionMode::Redirect),
        &off,
    );
    let db = find(&cs, DB);
    assert!(db.transport_socket.is_none() && db.transport_socket_matches.is_empty());
}

#[test]
fn sidecar_endpoints_carry_the_transport_socket_match_and_new_accounts_renew_the_sans() {
    let mut meshed_ep = endpoint("10.0.0.9", 9080, "v3", "us-east/a", true);
    meshed_ep
        .labels
        .insert("security.istio.io/tlsMode".into(), "istio".into());
    meshed_ep.service_account = "reviews-v3".into();
    let mut eps = crate::xds::testing::reviews_endpoints();
    eps.endpoints.push(meshed_ep);
    let push = mesh().with_changes(2, [Chunk::Endpoints(eps.clone())], []);
    let p = meshed("shop", "10.1.0.5", InterceptionMode::Redirect);
    let cla: Vec<ClusterLoadAssignment> = generate(ENDPOINT, &p, &push, &[REVIEWS]);
    let metadata: Vec<bool> = cla[0]
        .endpoints
        .iter()
        .flat_map(|l| &l.lb_endpoints)
        .map(|e| {
            e.metadata.as_ref().is_some_and(|m| {
                m.filter_metadata["envoy.transport_socket_match"].fields["tlsMode"].kind
                    == Some(Kind::StringValue("istio".into()))
            })
        })
        .collect();
    assert_eq!(metadata.iter().filter(|m| **m).count(), 1, "{metadata:?}");

    // One generator across the change: the SANs follow the endpoints' accounts.
    let g = crate::xds::Generator::new();
    let sans = |push: &PushContext| {
        let r = g
            .generate(CLUSTER, &p, push, &[REVIEWS.to_string()])
            .unwrap();
        let c: Cluster = crate::xds::testing::decode(&r[0]);
        let tls = upstream(
            c.transport_socket_matches[0]
                .transport_socket
                .as_ref()
                .unwrap(),
        );
        sds_names(&tls.common_tls_context.unwrap()).2
    };
    assert_eq!(sans(&mesh()), ["spiffe://cluster.local/ns/shop/sa/reviews"]);
    assert_eq!(
        sans(&push),
        [
            "spiffe://cluster.local/ns/shop/sa/reviews",
            "spiffe://cluster.local/ns/shop/sa/reviews-v3"
        ]
    );
    let _: &ServiceEndpoints = &eps;
}
