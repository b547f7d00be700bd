use super::*;
use crate::ads::status::TypeStatus;
use envoy_types::pb::envoy::admin::v3::ClientResourceStatus;
use envoy_types::pb::envoy::service::status::v3::client_status_discovery_service_client::ClientStatusDiscoveryServiceClient;
use envoy_types::pb::envoy::service::status::v3::{
    ClientConfig, ClientStatusRequest, ConfigStatus, client_config::GenericXdsConfig,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    NodeMatcher, RegexMatcher, StringMatcher, StructMatcher, string_matcher::MatchPattern,
};
use envoy_types::pb::google::protobuf::value::Kind;
use shoal_proto::security::{
    AuthMethod, Authenticator, AuthnError, Credentials, Identity, Principal,
};
use shoal_proto::xds::{NodeMetadata, Proxy};
use std::sync::Arc;
use tonic::Code;

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
const WEB: &str = "sidecar~10.0.0.1~web-1.shop~shop.svc.cluster.local";
const DB: &str = "sidecar~10.0.0.2~db-0.data~data.svc.cluster.local";
const GATEWAY: &str = "router~10.0.0.3~gw-1.edge~edge.svc.cluster.local";

fn proxy(id: &str) -> Proxy {
    let meta = NodeMetadata {
        cluster_id: "Kubernetes".into(),
        ..Default::default()
    };
    Proxy::from_node(id, meta, String::new(), Identity::Anonymous).unwrap()
}

/// A type sent version `v` (nonce `v-1`) and not answered yet.
fn sent(type_url: &str, v: &str) -> TypeStatus {
    let mut t = TypeStatus::new(type_url);
    t.wildcard = true;
    t.sent(v, &format!("{v}-1"));
    t
}

fn acked(type_url: &str, v: &str) -> TypeStatus {
    let mut t = sent(type_url, v);
    t.acked(&format!("{v}-1"), v, &Default::default());
    t.resources = 3;
    t
}

fn nacked(type_url: &str, v: &str, message: &str) -> TypeStatus {
    let mut t = sent(type_url, v);
    t.nacked(&format!("{v}-1"), message);
    t
}

fn status_of(c: &GenericXdsConfig) -> (ConfigStatus, ClientResourceStatus) {
    (
        ConfigStatus::try_from(c.config_status).unwrap(),
        ClientResourceStatus::try_from(c.client_status).unwrap(),
    )
}

/// Each state of `/debug/syncz` as Envoy's two enums, the version last sent beside it.
#[test]
fn each_sync_state_is_envoys_config_status_and_client_status() {
    use ClientResourceStatus as Client;
    let not_sent = TypeStatus::new(CDS);
    let c = type_config(&not_sent);
    assert_eq!(c.type_url, CDS);
    assert_eq!(status_of(&c), (ConfigStatus::NotSent, Client::Requested));
    assert_eq!(c.version_info, "");

    // Sent, not answered yet: what was sent is counted, not held.
    let mut first = sent(CDS, "7");
    first.resources = 3;
    let c = type_config(&first);
    assert_eq!(status_of(&c), (ConfigStatus::Stale, Client::Requested));
    assert_eq!(c.version_info, "7");

    let c = type_config(&acked(CDS, "7"));
    assert_eq!(status_of(&c), (ConfigStatus::Synced, Client::Acked));
    assert_eq!((c.version_info.as_str(), c.error_state), ("7", None));

    // Version 8 sent after 7 was ACKed: stale, the proxy holding 7.
    let mut newer = acked(CDS, "7");
    newer.sent("8", "8-2");
    let c = type_config(&newer);
    assert_eq!(status_of(&c), (ConfigStatus::Stale, Client::Acked));
    assert_eq!(c.version_info, "8");

    // A Delta proxy that reconnected holding every current version was sent nothing.
    let mut resumed = TypeStatus::new(CDS);
    resumed.resources = 4;
    resumed.version_acked = "9".into();
    let c = type_config(&resumed);
    assert_eq!(status_of(&c), (ConfigStatus::Synced, Client::Acked));
    assert_eq!(c.version_info, "9");
    // No resource contents, ever.
    assert_eq!(c.xds_config, None);
}

#[test]
fn a_nack_is_an_error_with_envoys_message_and_the_rejected_version_until_an_ack() {
    use ClientResourceStatus as Client;
    let message = "Proto constraint validation failed: regex program size 124 > max 100";
    let mut t = nacked(RDS, "12", message);
    let c = type_config(&t);
    assert_eq!(status_of(&c), (ConfigStatus::Error, Client::Nacked));
    let error = c.error_state.expect("error_state");
    assert_eq!(error.details, message);
    assert_eq!(error.version_info, "12");
    assert_eq!(c.version_info, "12");

    // A fix is sent: stale, and the proxy still holds its rejection.
    t.sent("13", "13-2");
    let c = type_config(&t);
    assert_eq!(status_of(&c), (ConfigStatus::Stale, Client::Nacked));
    assert_eq!(c.error_state.unwrap().version_info, "12");

    // The fix is ACKed: the error is gone.
    t.acked("13-2", "13", &Default::default());
    let c = type_config(&t);
    assert_eq!(status_of(&c), (ConfigStatus::Synced, Client::Acked));
    assert_eq!(c.error_state, None);
}

#[test]
fn the_node_names_the_proxy_with_its_namespace_and_cluster() {
    let c = client_config(
        &proxy(WEB),
        &[acked(CDS, "1").into(), sent(RDS, "1").into()],
    );
    let node = c.node.unwrap();
    assert_eq!(node.id, WEB);
    let fields = node.metadata.unwrap().fields;
    let text = |k: &str| match &fields[k].kind {
        Some(Kind::StringValue(s)) => s.clone(),
        other => panic!("{k}: {other:?}"),
    };
    assert_eq!(text("NAMESPACE"), "shop");
    assert_eq!(text("CLUSTER_ID"), "Kubernetes");
    let types: Vec<&str> = c
        .generic_xds_configs
        .iter()
        .map(|t| t.type_url.as_str())
        .collect();
    assert_eq!(types, [CDS, RDS]);
}

fn id_matcher(pattern: MatchPattern, ignore_case: bool) -> NodeMatcher {
    NodeMatcher {
        node_id: Some(StringMatcher {
            ignore_case,
            match_pattern: Some(pattern),
        }),
        ..Default::default()
    }
}

fn regex(re: &str) -> MatchPattern {
    MatchPattern::SafeRegex(RegexMatcher {
        regex: re.into(),
        ..Default::default()
    })
}

fn filter(matchers: &[NodeMatcher]) -> NodeFilter {
    NodeFilter::new(matchers).unwrap()
}

#[test]
fn node_matchers_select_by_node_id_and_any_one_suffices() {
    assert!(filter(&[]).matches(WEB), "no matcher: every proxy");
    assert!(filter(&[NodeMatcher::default()]).matches(WEB), "no node_id");
    let exact = filter(&[id_matcher(MatchPattern::Exact(WEB.into()), false)]);
    assert!(exact.matches(WEB) && !exact.matches(DB));
    let prefix = filter(&[id_matcher(MatchPattern::Prefix("sidecar~".into()), false)]);
    assert!(prefix.matches(WEB) && prefix.matches(DB) && !prefix.matches(GATEWAY));
    let suffix = filter(&[id_matcher(
        MatchPattern::Suffix("~shop.svc.cluster.local".into()),
        false,
    )]);
    assert!(suffix.matches(WEB) && !suffix.matches(DB));
    let contains = filter(&[id_matcher(MatchPattern::Contains("~db-0.".into()), false)]);
    assert!(contains.matches(DB) && !contains.matches(WEB));
    let upper = filter(&[id_matcher(MatchPattern::Prefix("ROUTER~".into()), true)]);
    assert!(upper.matches(GATEWAY) && !upper.matches(WEB));
    let case = filter(&[id_matcher(MatchPattern::Prefix("ROUTER~".into()), false)]);
    assert!(!case.matches(GATEWAY));
    // A regex matches the whole ID.
    let whole = filter(&[id_matcher(regex(r"router~.*"), false)]);
    assert!(whole.matches(GATEWAY) && !whole.matches(WEB));
    assert!(!filter(&[id_matcher(regex("gw-1"), false)]).matches(GATEWAY));
    // ORed.
    let either = filter(&[
        id_matcher(MatchPattern::Exact(WEB.into()), false),
        id_matcher(MatchPattern::Exact(DB.into()), false),
    ]);
    assert!(either.matches(WEB) && either.matches(DB) && !either.matches(GATEWAY));
    let nothing = filter(&[id_matcher(
        MatchPattern::Exact("no-such-proxy".into()),
        false,
    )]);
    assert!(!nothing.matches(WEB));
}

#[test]
fn matchers_this_server_cannot_honour_are_refused_not_ignored() {
    let metadata = NodeMatcher {
        node_metadatas: vec![StructMatcher::default()],
        ..Default::default()
    };
    let e = NodeFilter::new(&[NodeMatcher::default(), metadata]).unwrap_err();
    assert_eq!(
        e,
        CsdsError::UnsupportedMatcher {
            index: 1,
            what: "node_metadatas"
        }
    );
    let no_pattern = NodeMatcher {
        node_id: Some(StringMatcher::default()),
        ..Default::default()
    };
    assert_eq!(
        NodeFilter::new(&[no_pattern]).unwrap_err(),
        CsdsError::NoPattern { index: 0 }
    );
    let e = NodeFilter::new(&[id_matcher(regex("(unclosed"), false)]).unwrap_err();
    assert!(matches!(e, CsdsError::BadRegex { index: 0, .. }), "{e}");
    let status = tonic::Status::from(e);
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("(unclosed"), "{status:?}");
}

/// Fixed proxies, in the order given.
struct Fixed(Vec<(Proxy, Vec<TypeStatus>)>);

impl ConnectedProxies for Fixed {
    fn visit(&self, visit: &mut dyn FnMut(&Proxy, &[Arc<TypeStatus>])) {
        for (proxy, types) in &self.0 {
            let types: Vec<Arc<TypeStatus>> = types.iter().cloned().map(Arc::new).collect();
            visit(proxy, &types);
        }
    }
}

fn three_proxies() -> Arc<Fixed> {
    Arc::new(Fixed(vec![
        (proxy(WEB), vec![acked(CDS, "5"), acked(RDS, "5")]),
        (proxy(GATEWAY), vec![acked(CDS, "5")]),
        (
            proxy(DB),
            vec![acked(CDS, "5"), nacked(RDS, "5", "bad route")],
        ),
    ]))
}

fn ids(configs: &[ClientConfig]) -> Vec<&str> {
    configs
        .iter()
        .map(|c| c.node.as_ref().unwrap().id.as_str())
        .collect()
}

#[test]
fn an_answer_holds_the_matching_proxies_in_node_id_order() {
    let proxies = three_proxies();
    let all = answer(&*proxies, &ClientStatusRequest::default()).unwrap();
    assert_eq!(ids(&all.config), [GATEWAY, WEB, DB]);
    let sidecars = ClientStatusRequest {
        node_matchers: vec![id_matcher(MatchPattern::Prefix("sidecar~".into()), false)],
        ..Default::default()
    };
    let answered = answer(&*proxies, &sidecars).unwrap();
    assert_eq!(ids(&answered.config), [WEB, DB]);
    let db_rds = &answered.config[1].generic_xds_configs[1];
    assert_eq!(db_rds.error_state.as_ref().unwrap().details, "bad route");
}

/// `Bearer <namespace>` proves `sa/istioctl` of that namespace (`istio-system` or
/// `shop`); no token proves nothing; another token is refused.
struct NamespaceTokens;

#[async_trait::async_trait]
impl Authenticator for NamespaceTokens {
    fn name(&self) -> &'static str {
        "namespace-tokens"
    }

    async fn authenticate(&self, credentials: &Credentials) -> Result<Identity, AuthnError> {
        match credentials.bearer_token.as_deref() {
            None => Ok(Identity::Anonymous),
            Some(ns @ ("istio-system" | "shop")) => Ok(Identity::authenticated(Principal {
                trust_domain: "cluster.local".into(),
                namespace: ns.into(),
                service_account: "istioctl".into(),
                method: AuthMethod::Jwt,
            })),
            Some(_) => Err(AuthnError::Rejected {
                authenticator: "namespace-tokens",
                reason: "unknown token".into(),
            }),
        }
    }
}

fn control_plane() -> Access {
    Access::ControlPlane {
        authenticator: Arc::new(NamespaceTokens),
        system_namespace: "istio-system".into(),
    }
}

fn token(t: &str) -> Credentials {
    Credentials {
        bearer_token: Some(t.into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn the_secure_listener_answers_only_the_control_planes_namespace() {
    assert_eq!(Access::Anyone.check(&Credentials::default()).await, Ok(()));
    let access = control_plane();
    assert_eq!(access.check(&token("istio-system")).await, Ok(()));
    let denied = tonic::Status::from(access.check(&token("shop")).await.unwrap_err());
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    assert!(
        denied.message().contains("ns/shop/sa/istioctl")
            && denied.message().contains("istio-system"),
        "{denied:?}"
    );
    let anonymous = tonic::Status::from(access.check(&Credentials::default()).await.unwrap_err());
    assert_eq!(anonymous.code(), Code::Unauthenticated, "{anonymous:?}");
    assert!(anonymous.message().contains("proved none"), "{anonymous:?}");
    let forged = tonic::Status::from(access.check(&token("forged")).await.unwrap_err());
    assert_eq!(forged.code(), Code::Unauthenticated, "{forged:?}");
    assert!(
        forged.message().contains("unknown token") && !forged.message().contains("forged"),
        "{forged:?}"
    );
}

/// CSDS over `proxies`, served on a port of its own; a client of it.
async fn serve(
    proxies: Arc<Fixed>,
    access: Access,
) -> ClientStatusDiscoveryServiceClient<tonic::transport::Channel> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service(proxies, access))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    ClientStatusDiscoveryServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
}

#[tokio::test]
async fn both_methods_answer_over_grpc() {
    let mut client = serve(three_proxies(), Access::Anyone).await;
    let fetched = client
        .fetch_client_status(ClientStatusRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ids(&fetched.config), [GATEWAY, WEB, DB]);

    // One answer per request, in order.
    let only = |id: &str| ClientStatusRequest {
        node_matchers: vec![id_matcher(MatchPattern::Exact(id.into()), false)],
        ..Default::default()
    };
    let requests = futures::stream::iter([only(WEB), only("nobody"), only(DB)]);
    let mut answers = client
        .stream_client_status(requests)
        .await
        .unwrap()
        .into_inner();
    let mut got = Vec::new();
    while let Some(answer) = answers.message().await.unwrap() {
        got.push(ids(&answer.config).join(","));
    }
    assert_eq!(got, [WEB, "", DB]);

    // A matcher it cannot honour fails the call, saying why.
    let metadata = ClientStatusRequest {
        node_matchers: vec![NodeMatcher {
            node_metadatas: vec![StructMatcher::default()],
            ..Default::default()
        }],
        ..Default::default()
    };
    let refused = client.fetch_client_status(metadata).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
}

#[tokio::test]
async fn a_caller_outside_the_control_plane_is_refused_on_either_method() {
    let mut client = serve(three_proxies(), control_plane()).await;
    let with = |t: &str| {
        let mut request = tonic::Request::new(ClientStatusRequest::default());
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
        request
    };
    let answered = client
        .fetch_client_status(with("istio-system"))
        .await
        .unwrap();
    assert_eq!(answered.into_inner().config.len(), 3);
    let refused = client.fetch_client_status(with("shop")).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let mut request = tonic::Request::new(futures::stream::iter([ClientStatusRequest::default()]));
    request
        .metadata_mut()
        .insert("authorization", "Bearer shop".parse().unwrap());
    let refused = client.stream_client_status(request).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let anonymous = client
        .stream_client_status(futures::stream::iter([ClientStatusRequest::default()]))
        .await
        .unwrap_err();
    assert_eq!(anonymous.code(), Code::Unauthenticated, "{anonymous:?}");
}

/// An edge holding 100k proxies answers them all in one message, well over gRPC's
/// default 4 MiB (the service raises tonic's encoding limit; the client raises its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_proxies_are_answered_in_one_message() {
    let types = [
        CDS,
        RDS,
        "type.googleapis.com/envoy.config.listener.v3.Listener",
        "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
    ];
    let proxies: Vec<_> = (0..100_000u32)
        .map(|i| {
            let id = format!(
                "sidecar~10.{}.{}.{}~app-{i}.ns-{}~ns-{}.svc.cluster.local",
                i >> 16,
                (i >> 8) & 255,
                i & 255,
                i % 500,
                i % 500
            );
            (proxy(&id), types.iter().map(|t| acked(t, "4242")).collect())
        })
        .collect();
    let client = serve(Arc::new(Fixed(proxies)), Access::Anyone).await;
    let mut client = client.max_decoding_message_size(MAX_RESPONSE_BYTES);
    let started = std::time::Instant::now();
    let answered = client
        .fetch_client_status(ClientStatusRequest::default())
        .await
        .unwrap()
        .into_inner();
    let bytes = prost::Message::encoded_len(&answered);
    println!(
        "100k proxies: {} MiB in {:?}",
        bytes >> 20,
        started.elapsed()
    );
    assert_eq!(answered.config.len(), 100_000);
    assert!(bytes > 4 << 20, "{bytes}");
}
