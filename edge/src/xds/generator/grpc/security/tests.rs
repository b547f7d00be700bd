//! Proxyless gRPC security through the generator: certificate-provider mTLS on
//! clients' clusters, servers' listeners by PeerAuthentication, AuthorizationPolicy as
//! gRPC's RBAC filters, and what gRPC cannot do failing closed.

use super::authz::{RBAC_ALLOW_FILTER, RBAC_DENY_FILTER};
use crate::proxy::{InterceptionMode, Proxy, ProxyKind};
use crate::xds::clusters::inbound::tests::{WORKLOAD, workload_mesh};
use crate::xds::testing::{decode, generate, labels, mesh, proxy, reviews_endpoints, shop, unpack};
use crate::xds::types::{CLUSTER, LISTENER};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{TransportSocket, transport_socket};
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::config::rbac::v3::rbac::Action;
use envoy_types::pb::envoy::config::route::v3::route;
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac as HttpRbac;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager, http_filter,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CommonTlsContext, DownstreamTlsContext, UpstreamTlsContext, common_tls_context,
};
use shoal_proto::config::istio::{ClientTlsSettings, TrafficPolicy};
use shoal_proto::config::security::{
    AuthorizationPolicy, AuthorizationRule, Condition, Operation, PeerAuthentication,
    PeerMutualTls, RuleFrom, RuleTo, Source,
};
use shoal_proto::model::{NamedConfig, NamespaceConfig};
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::Chunk;

const TLS_MODE: (&str, &str) = ("security.istio.io/tlsMode", "istio");

fn grpc(ns: &str, ip: &str, meshed: bool) -> Proxy {
    let mut p = Proxy {
        kind: ProxyKind::ProxylessGrpc,
        ..proxy(ns, ip, InterceptionMode::Redirect)
    };
    if meshed {
        p.labels.insert(TLS_MODE.0.into(), TLS_MODE.1.into());
    }
    p
}

fn server_name(port: u32) -> String {
    format!("xds.istio.io/grpc/lds/inbound/{WORKLOAD}:{port}")
}

fn named<T>(ns: &str, name: &str, spec: T) -> NamedConfig<T> {
    NamedConfig {
        name: name.into(),
        namespace: ns.into(),
        created: 0,
        spec,
    }
}

/// The workload mesh with `edit` applied to namespace `app`.
fn with_app(edit: impl FnOnce(&mut NamespaceConfig)) -> PushContext {
    let base = workload_mesh();
    let mut app = (**base.namespace("app").unwrap()).clone();
    edit(&mut app);
    base.with_changes(2, [Chunk::Namespace(app)], [])
}

fn peer(mode: &str) -> NamedConfig<PeerAuthentication> {
    named(
        "app",
        "default",
        PeerAuthentication {
            mtls: Some(PeerMutualTls {
                mode: Some(mode.into()),
            }),
            ..Default::default()
        },
    )
}

fn typed<M: prost::Message + prost::Name + Default>(socket: &TransportSocket) -> M {
    assert_eq!(socket.name, "envoy.transport_sockets.tls");
    match &socket.config_type {
        Some(transport_socket::ConfigType::TypedConfig(any)) => unpack(any),
        None => panic!("{} has no config", socket.name),
    }
}

/// (identity provider instance/name, root provider instance/name, SANs), checking
/// that nothing gRPC NACKs is set.
#[allow(deprecated)]
fn providers(common: &CommonTlsContext) -> (String, String, Vec<String>) {
    assert!(common.tls_params.is_none(), "gRPC NACKs tls_params");
    assert!(
        common.tls_certificate_sds_secret_configs.is_empty() && common.tls_certificates.is_empty()
    );
    let cert = common.tls_certificate_provider_instance.as_ref().unwrap();
    let old = common
        .tls_certificate_certificate_provider_instance
        .as_ref()
        .unwrap();
    assert_eq!(
        (&old.instance_name, &old.certificate_name),
        (&cert.instance_name, &cert.certificate_name)
    );
    let Some(common_tls_context::ValidationContextType::CombinedValidationContext(combined)) =
        &common.validation_context_type
    else {
        panic!("no combined validation context")
    };
    assert!(combined.validation_context_sds_secret_config.is_none());
    let v = combined.default_validation_context.as_ref().unwrap();
    let root = v.ca_certificate_provider_instance.as_ref().unwrap();
    let old_root = combined
        .validation_context_certificate_provider_instance
        .as_ref()
        .unwrap();
    assert_eq!(old_root.certificate_name, root.certificate_name);
    let sans = v
        .match_subject_alt_names
        .iter()
        .map(|m| format!("{:?}", m.match_pattern))
        .collect();
    (
        format!("{}/{}", cert.instance_name, cert.certificate_name),
        format!("{}/{}", root.instance_name, root.certificate_name),
        sans,
    )
}

fn hcm(l: &Listener) -> HttpConnectionManager {
    let [chain] = l.filter_chains.as_slice() else {
        panic!("{}: one chain: {:?}", l.name, l.filter_chains)
    };
    assert!(
        chain.filter_chain_match.is_none(),
        "gRPC matches no TLS or ALPN"
    );
    let [f] = chain.filters.as_slice() else {
        panic!("one filter")
    };
    match &f.config_type {
        Some(filter::ConfigType::TypedConfig(any)) => unpack(any),
        other => panic!("no HCM: {other:?}"),
    }
}

fn filter_names(l: &Listener) -> Vec<String> {
    hcm(l).http_filters.into_iter().map(|f| f.name).collect()
}

fn rbac(l: &Listener, name: &str) -> HttpRbac {
    let f = hcm(l)
        .http_filters
        .into_iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no {name} filter"));
    match f.config_type {
        Some(http_filter::ConfigType::TypedConfig(any)) => unpack(&any),
        _ => panic!("{name}: no config"),
    }
}

fn server(p: &Proxy, push: &PushContext, port: u32) -> Option<Listener> {
    let name = server_name(port);
    generate::<Listener>(LISTENER, p, push, &[&name]).pop()
}

#[test]
fn a_server_listener_is_its_port_with_one_chain_and_a_non_forwarding_route() {
    let p = grpc("app", WORKLOAD, true);
    let push = workload_mesh();
    let (rpc, nothing) = (server_name(7070), server_name(7777));
    let names = [
        nothing.as_str(),
        "rpc.app.svc.cluster.local:7070",
        rpc.as_str(),
    ];
    let got: Vec<Listener> = generate(LISTENER, &p, &push, &names);
    let got_names: Vec<&str> = got.iter().map(|l| l.name.as_str()).collect();
    // No service selects 7777: no listener (the server stays not serving). The client's
    // listener and the server's come in the order asked.
    assert_eq!(got_names, ["rpc.app.svc.cluster.local:7070", rpc.as_str()]);
    let l = &got[1];
    let addr = format!("{:?}", l.address);
    assert!(addr.contains(WORKLOAD) && addr.contains("7070"), "{addr}");
    assert!(l.listener_filters.is_empty() && l.use_original_dst.is_none());
    let h = hcm(l);
    assert_eq!(filter_names(l), ["envoy.filters.http.router"]);
    let Some(http_connection_manager::RouteSpecifier::RouteConfig(rc)) = h.route_specifier else {
        panic!("inline route")
    };
    let r = &rc.virtual_hosts[0].routes[0];
    assert!(matches!(
        r.action,
        Some(route::Action::NonForwardingAction(_))
    ));

    // A wildcard request is the clients' listeners only, as in Istio.
    let all: Vec<Listener> = generate(LISTENER, &p, &push, &[]);
    assert!(all.iter().all(|l| !l.name.starts_with("xds.istio.io")));
}

#[test]
fn servers_follow_peer_authentication_within_what_grpc_matches() {
    // (mode, labelled tlsMode=istio) → mTLS?
    for (mode, meshed, mtls) in [
        // PERMISSIVE cannot be both for gRPC: STRICT when labelled, as Istio.
        ("PERMISSIVE", true, true),
        ("PERMISSIVE", false, false),
        ("STRICT", true, true),
        ("DISABLE", true, false),
    ] {
        let push = with_app(|ns| ns.peer_authentications.push(peer(mode)));
        let l = server(&grpc("app", WORKLOAD, meshed), &push, 7070).expect("listener");
        let chain = &l.filter_chains[0];
        assert_eq!(
            chain.transport_socket.is_some(),
            mtls,
            "{mode} labelled={meshed}"
        );
        assert_eq!(filter_names(&l), ["envoy.filters.http.router"], "{mode}");
        if mtls {
            assert_eq!(chain.name, "inbound-mtls");
            let tls: DownstreamTlsContext = typed(chain.transport_socket.as_ref().unwrap());
            assert_eq!(tls.require_client_certificate.map(|b| b.value), Some(true));
            let (cert, root, sans) = providers(tls.common_tls_context.as_ref().unwrap());
            assert_eq!(
                (cert.as_str(), root.as_str()),
                ("default/default", "default/ROOTCA")
            );
            assert!(sans.is_empty(), "a gRPC server NACKs SAN matchers");
        }
    }
    // A port-level mode wins.
    let push = with_app(|ns| {
        let mut pa = peer("STRICT");
        pa.spec.port_level_mtls.insert(
            "7070".into(),
            PeerMutualTls {
                mode: Some("DISABLE".into()),
            },
        );
        pa.spec.selector = Some(shoal_proto::config::security::PolicySelector {
            match_labels: labels(&[("app", "productpage")]),
        });
        ns.peer_authentications.push(pa);
    });
    let l = server(&grpc("app", WORKLOAD, true), &push, 7070).unwrap();
    assert!(l.filter_chains[0].transport_socket.is_none());
}

#[test]
fn strict_for_a_server_without_xds_credentials_denies_every_call() {
    let push = with_app(|ns| ns.peer_authentications.push(peer("STRICT")));
    let l = server(&grpc("app", WORKLOAD, false), &push, 7070).unwrap();
    assert!(
        l.filter_chains[0].transport_socket.is_none(),
        "it would NACK TLS"
    );
    assert_eq!(
        filter_names(&l),
        [RBAC_DENY_FILTER, "envoy.filters.http.router"]
    );
    let r = rbac(&l, RBAC_DENY_FILTER).rules.unwrap();
    assert_eq!(r.action, Action::Deny as i32);
    let keys: Vec<&String> = r.policies.keys().collect();
    assert_eq!(
        keys,
        ["ns[app]-policy[shoal-strict-without-xds-credentials]-rule[0]"]
    );
}

fn policy(
    name: &str,
    action: &str,
    rules: Vec<AuthorizationRule>,
) -> NamedConfig<AuthorizationPolicy> {
    named(
        "app",
        name,
        AuthorizationPolicy {
            action: Some(action.into()),
            rules,
            ..Default::default()
        },
    )
}

fn path_rule(path: &str) -> AuthorizationRule {
    AuthorizationRule {
        to: vec![RuleTo {
            operation: Some(Operation {
                paths: vec![path.into()],
                ..Default::default()
            }),
        }],
        ..Default::default()
    }
}

fn when(key: &str) -> Condition {
    Condition {
        key: key.into(),
        values: vec!["x".into()],
        ..Default::default()
    }
}

#[test]
fn authorization_policies_are_grpc_rbac_filters_failing_closed_on_what_grpc_lacks() {
    let from_jwt = AuthorizationRule {
        from: vec![RuleFrom {
            source: Some(Source {
                request_principals: vec!["*".into()],
                ..Default::default()
            }),
        }],
        ..Default::default()
    };
    let mut grpc_header = path_rule("/pkg.Svc/Get");
    grpc_header.when.push(when("request.headers[grpc-timeout]"));
    let push = with_app(|ns| {
        ns.authorization_policies.extend([
            policy("deny-put", "DENY", vec![path_rule("/pkg.Svc/Put")]),
            // DENY loses the header it cannot see: it denies every Get.
            policy("deny-header", "DENY", vec![grpc_header.clone()]),
            policy("custom", "CUSTOM", vec![path_rule("/pkg.Svc/Admin")]),
            policy("audit", "AUDIT", vec![AuthorizationRule::default()]),
            // ALLOW rules gRPC cannot evaluate never match.
            policy(
                "allow",
                "ALLOW",
                vec![path_rule("/pkg.Svc/List"), from_jwt, grpc_header],
            ),
        ]);
    });
    let l = server(&grpc("app", WORKLOAD, true), &push, 7070).unwrap();
    assert_eq!(
        filter_names(&l),
        [
            RBAC_DENY_FILTER,
            RBAC_ALLOW_FILTER,
            "envoy.filters.http.router"
        ],
        "unique names (gRPC NACKs duplicates), no AUDIT (LOG is ignored by gRPC)"
    );
    let deny = rbac(&l, RBAC_DENY_FILTER).rules.unwrap();
    assert_eq!(deny.action, Action::Deny as i32);
    let mut keys: Vec<&String> = deny.policies.keys().collect();
    keys.sort();
    // CUSTOM's rule may carry a suffix saying why it denies.
    assert!(
        keys.len() == 3 && keys[0].starts_with("ns[app]-policy[custom]-rule[0]"),
        "{keys:?}"
    );
    assert_eq!(
        keys[1..],
        [
            "ns[app]-policy[deny-header]-rule[0]",
            "ns[app]-policy[deny-put]-rule[0]"
        ]
    );
    let header_rule = format!("{:?}", deny.policies["ns[app]-policy[deny-header]-rule[0]"]);
    assert!(!header_rule.contains("grpc-timeout"), "{header_rule}");
    assert!(header_rule.contains("/pkg.Svc/Get"), "{header_rule}");
    let allow = rbac(&l, RBAC_ALLOW_FILTER).rules.unwrap();
    assert_eq!(allow.action, Action::Allow as i32);
    let keys: Vec<&String> = allow.policies.keys().collect();
    assert_eq!(keys, ["ns[app]-policy[allow]-rule[0]"]);
    assert!(!format!("{allow:?}").contains("grpc-timeout"));
}

const REVIEWS: &str = "outbound|9080||reviews.shop.svc.cluster.local";
const REVIEWS_V1: &str = "outbound|9080|v1|reviews.shop.svc.cluster.local";

/// The test mesh with reviews' endpoints labelled tlsMode=istio where `meshed` says
/// so (v1 at 10.0.0.1 and 10.0.0.3, v2 at 10.0.0.2), and reviews' rule's `tls`.
fn reviews_mesh(meshed: &[&str], tls: Option<&str>) -> PushContext {
    let mut eps = reviews_endpoints();
    for ep in &mut eps.endpoints {
        if meshed.contains(&ep.address.as_str()) {
            ep.labels.insert(TLS_MODE.0.into(), TLS_MODE.1.into());
        }
    }
    let mut ns = shop();
    if let Some(mode) = tls {
        let dr = ns
            .destination_rules
            .iter_mut()
            .find(|d| d.name == "reviews")
            .expect("reviews rule");
        dr.spec
            .traffic_policy
            .get_or_insert_with(TrafficPolicy::default)
            .tls = Some(Box::new(ClientTlsSettings {
            mode: Some(mode.into()),
            ..Default::default()
        }));
    }
    mesh().with_changes(2, [Chunk::Namespace(ns), Chunk::Endpoints(eps)], [])
}

fn cluster(p: &Proxy, push: &PushContext, name: &str) -> Option<Cluster> {
    generate::<Cluster>(CLUSTER, p, push, &[name]).pop()
}

fn client_tls(c: &Cluster) -> Option<(String, String, Vec<String>)> {
    assert!(
        c.transport_socket_matches.is_empty(),
        "gRPC has no transport socket matches"
    );
    let socket = c.transport_socket.as_ref()?;
    let tls: UpstreamTlsContext = typed(socket);
    Some(providers(tls.common_tls_context.as_ref().unwrap()))
}

#[test]
fn clients_get_certificate_provider_mtls_by_the_rule_or_auto_mtls() {
    let (with, without) = (
        grpc("shop", "10.1.0.7", true),
        grpc("shop", "10.1.0.8", false),
    );
    let reviews_sa = "Some(Exact(\"spiffe://cluster.local/ns/shop/sa/reviews\"))".to_string();

    // ISTIO_MUTUAL: the providers and the destination's accounts; nothing (refused, not
    // plaintext) for a client without xDS credentials.
    let explicit = reviews_mesh(&[], Some("ISTIO_MUTUAL"));
    let tls = client_tls(&cluster(&with, &explicit, REVIEWS).unwrap()).expect("mTLS");
    assert_eq!(
        tls,
        (
            "default/default".into(),
            "default/ROOTCA".into(),
            vec![reviews_sa.clone()]
        )
    );
    assert!(cluster(&without, &explicit, REVIEWS).is_none());

    // Auto mTLS, per cluster: every selected endpoint meshed, or plaintext.
    let all = reviews_mesh(&["10.0.0.1", "10.0.0.2", "10.0.0.3"], None);
    assert!(client_tls(&cluster(&with, &all, REVIEWS).unwrap()).is_some());
    assert!(client_tls(&cluster(&without, &all, REVIEWS).unwrap()).is_none());
    let v1_only = reviews_mesh(&["10.0.0.1", "10.0.0.3"], None);
    assert!(client_tls(&cluster(&with, &v1_only, REVIEWS_V1).unwrap()).is_some());
    assert!(
        client_tls(&cluster(&with, &v1_only, REVIEWS).unwrap()).is_none(),
        "mixed"
    );
    assert!(client_tls(&cluster(&with, &mesh(), REVIEWS).unwrap()).is_none());

    // SIMPLE and DISABLE: plaintext (reported for SIMPLE).
    for mode in ["SIMPLE", "DISABLE"] {
        let push = reviews_mesh(&["10.0.0.1", "10.0.0.2", "10.0.0.3"], Some(mode));
        assert!(
            client_tls(&cluster(&with, &push, REVIEWS).unwrap()).is_none(),
            "{mode}"
        );
    }
}

#[test]
fn a_client_cluster_follows_its_endpoints_labels_and_accounts() {
    let p = grpc("shop", "10.1.0.7", true);
    let g = crate::xds::Generator::new();
    let get = |push: &PushContext| -> Cluster {
        decode(
            &g.generate(CLUSTER, &p, push, &[REVIEWS.to_string()])
                .unwrap()[0],
        )
    };
    let plain = reviews_mesh(&[], None);
    assert!(client_tls(&get(&plain)).is_none());
    // Same scope generation, new endpoint chunk: the answer is rebuilt.
    let mut eps = reviews_endpoints();
    for ep in &mut eps.endpoints {
        ep.labels.insert(TLS_MODE.0.into(), TLS_MODE.1.into());
        ep.service_account = "reviews-v9".into();
    }
    let meshed = plain.with_changes(3, [Chunk::Endpoints(eps)], []);
    let (_, _, sans) = client_tls(&get(&meshed)).expect("mTLS once every endpoint is meshed");
    assert_eq!(
        sans,
        ["Some(Exact(\"spiffe://cluster.local/ns/shop/sa/reviews-v9\"))"]
    );
}

#[test]
fn what_grpc_cannot_do_is_reported_naming_the_policy_and_the_proxy() {
    use super::server::ServerSecurity;
    use crate::xds::security::ProxyPolicies;
    use shoal_proto::push_context::security::{Authorization, MtlsMode, PeerAuthn};
    use std::sync::Arc;

    let mut jwt_rule = path_rule("/pkg.Svc/Get");
    jwt_rule.when.push(when("request.auth.claims[iss]"));
    let p = grpc("app", WORKLOAD, false);
    let policies = ProxyPolicies {
        mesh_identity: false,
        peer: PeerAuthn {
            mode: MtlsMode::Strict,
            ..Default::default()
        },
        authorization: Authorization {
            custom: vec![Arc::new(policy("ext", "CUSTOM", vec![path_rule("/a")]))],
            audit: vec![Arc::new(policy("log", "AUDIT", vec![]))],
            allow: vec![Arc::new(policy("jwt", "ALLOW", vec![jwt_rule]))],
            ..Default::default()
        },
        ..Default::default()
    };
    let mut warnings = Vec::new();
    let security = ServerSecurity::new(&policies, &p, &mut warnings);
    security.chain(7070, &mut warnings);
    for (policy, what) in [
        ("app/ext", "CUSTOM"),
        ("app/log", "AUDIT"),
        ("app/jwt rule 0", "when request.auth.claims[iss]"),
        (
            "PeerAuthentication STRICT on port 7070",
            "every call is denied",
        ),
    ] {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(policy) && w.contains(what) && w.contains(&p.id)),
            "{policy} {what} in {warnings:#?}"
        );
    }
}
