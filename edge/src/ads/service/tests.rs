use super::*;
use crate::ads::transport::tests::grpc;

use crate::ads::XdsConfig;
use crate::xds::Generator;
use crate::xds::types::CLUSTER;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use prost::Message;
use shoal_proto::push_context::PushContext;
use shoal_proto::security::{
    AuthMethod, Authenticator, AuthnError, Credentials, Identity, Principal,
};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use tower_service::Service;

const NODE: &str = "sidecar~10.0.0.1~web-1.a~a.svc.cluster.local";

type TestBody = StreamBody<ReceiverStream<Result<Frame<Bytes>, Infallible>>>;

fn service(config: XdsConfig) -> (AdsService, watch::Sender<Arc<PushContext>>) {
    let (tx, rx) = watch::channel(Arc::new(PushContext::empty()));
    let mut registry = prometheus_client::registry::Registry::default();
    let server = crate::ads::XdsServer::new(config, Arc::new(Generator::new()), rx, &mut registry);
    (server.ads_service(), tx)
}

/// A request on `path` whose body is fed through the returned sender.
fn request(
    path: &str,
) -> (
    mpsc::Sender<Result<Frame<Bytes>, Infallible>>,
    http::Request<TestBody>,
) {
    let (tx, rx) = mpsc::channel(8);
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("http://edge{path}"))
        .header(CONTENT_TYPE, "application/grpc")
        .body(StreamBody::new(ReceiverStream::new(rx)))
        .unwrap();
    (tx, req)
}

fn chunk(msg: &impl Message) -> Result<Frame<Bytes>, Infallible> {
    Ok(Frame::data(grpc(&msg.encode_to_vec()).into()))
}

fn first_sotw() -> DiscoveryRequest {
    DiscoveryRequest {
        node: Some(Node {
            id: NODE.into(),
            ..Default::default()
        }),
        type_url: CLUSTER.into(),
        ..Default::default()
    }
}

/// Calls `svc` with `req` (its first request sent), expects a served stream and its first
/// response, and returns the registered connection of `NODE`.
async fn served(
    svc: &mut AdsService,
    req: http::Request<TestBody>,
) -> Arc<crate::ads::registry::Connection> {
    let resp = svc.call(req).await.unwrap();
    assert_eq!(resp.status(), http::StatusCode::OK);
    assert!(resp.headers().get("grpc-status").is_none());
    // The first response is sent once the stream is registered.
    let mut body = resp.into_body();
    body.next_message::<DiscoveryResponse>()
        .await
        .unwrap()
        .unwrap();
    svc.shared.registry.proxy(NODE).expect("registered")
}

/// The status of a trailers-only response.
fn refusal(resp: &http::Response<AdsBody>) -> Status {
    assert!(resp.body().is_end_stream(), "trailers-only");
    assert_eq!(resp.headers()[CONTENT_TYPE], "application/grpc");
    Status::from_header_map(resp.headers()).expect("grpc-status in the headers")
}

#[tokio::test]
async fn other_methods_are_unimplemented() {
    let (mut svc, _snapshots) = service(XdsConfig::default());
    let (_tx, req) = request(&format!("/{SERVICE}/FetchAggregatedResources"));
    let resp = svc.call(req).await.unwrap();
    assert_eq!(refusal(&resp).code(), Code::Unimplemented);
}

#[tokio::test]
async fn compressed_requests_are_refused() {
    let (mut svc, _snapshots) = service(XdsConfig::default());
    let (_tx, mut req) = request(SOTW_PATH);
    req.headers_mut()
        .insert("grpc-encoding", HeaderValue::from_static("gzip"));
    let resp = svc.call(req).await.unwrap();
    assert_eq!(refusal(&resp).code(), Code::Unimplemented);
    assert_eq!(resp.headers()["grpc-accept-encoding"], "identity");

    let (tx, req) = request(SOTW_PATH);
    let mut compressed = grpc(&first_sotw().encode_to_vec());
    compressed[0] = 1;
    tx.send(Ok(Frame::data(compressed.into()))).await.unwrap();
    let status = refusal(&svc.call(req).await.unwrap());
    assert_eq!(status.code(), Code::Unimplemented);
    assert!(status.message().contains("compression"), "{status}");
}

#[tokio::test]
async fn an_oversized_first_request_is_refused() {
    let (mut svc, _snapshots) = service(XdsConfig {
        max_request_bytes: 64,
        ..Default::default()
    });
    let (tx, req) = request(SOTW_PATH);
    tx.send(chunk(&DiscoveryRequest {
        resource_names: vec!["x".repeat(100)],
        ..first_sotw()
    }))
    .await
    .unwrap();
    let status = refusal(&svc.call(req).await.unwrap());
    assert_eq!(status.code(), Code::ResourceExhausted);
}

#[tokio::test]
async fn sotw_stream_answers_then_closes_on_a_bad_request() {
    let (mut svc, _snapshots) = service(XdsConfig::default());
    let (tx, req) = request(SOTW_PATH);
    // The first request split across two chunks.
    let first = grpc(&first_sotw().encode_to_vec());
    let (a, b) = first.split_at(first.len() / 2);
    tx.send(Ok(Frame::data(Bytes::copy_from_slice(a))))
        .await
        .unwrap();
    tx.send(Ok(Frame::data(Bytes::copy_from_slice(b))))
        .await
        .unwrap();
    let resp = svc.call(req).await.unwrap();
    assert_eq!(resp.status(), http::StatusCode::OK);
    assert_eq!(resp.headers()[CONTENT_TYPE], "application/grpc");
    assert!(resp.headers().get("grpc-status").is_none());
    let mut body = resp.into_body();
    let cds = body
        .next_message::<DiscoveryResponse>()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cds.type_url, CLUSTER);
    assert_eq!(cds.version_info, "0");

    tx.send(Ok(Frame::data(Bytes::from_static(&[
        0, 0, 0, 0, 2, 0xff, 0xff,
    ]))))
    .await
    .unwrap();
    let status = body
        .next_message::<DiscoveryResponse>()
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(body.frame().await.is_none());
}

#[tokio::test]
async fn delta_stream_answers_and_ends_ok_when_the_proxy_half_closes() {
    let (mut svc, _snapshots) = service(XdsConfig::default());
    let (tx, req) = request(DELTA_PATH);
    tx.send(chunk(&DeltaDiscoveryRequest {
        node: first_sotw().node,
        type_url: CLUSTER.into(),
        ..Default::default()
    }))
    .await
    .unwrap();
    let mut body = svc.call(req).await.unwrap().into_body();
    let cds = body
        .next_message::<DeltaDiscoveryResponse>()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cds.type_url, CLUSTER);
    drop(tx);
    assert!(
        body.next_message::<DeltaDiscoveryResponse>()
            .await
            .is_none()
    );
    assert!(body.is_end_stream());
}

#[tokio::test(start_paused = true)]
async fn a_stream_without_a_first_request_times_out() {
    let (mut svc, _snapshots) = service(XdsConfig::default());
    let (_tx, req) = request(SOTW_PATH);
    let status = refusal(&svc.call(req).await.unwrap());
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert!(
        status.message().contains("SHOAL_XDS_FIRST_REQUEST_TIMEOUT"),
        "{status}"
    );
}

/// A stand-in authenticator: the token `good` is `web` of namespace `a`, anything else is
/// refused.
struct GoodToken;

#[async_trait::async_trait]
impl Authenticator for GoodToken {
    fn name(&self) -> &'static str {
        "good-token"
    }

    async fn authenticate(&self, creds: &Credentials) -> Result<Identity, AuthnError> {
        match creds.bearer_token.as_deref() {
            Some("good") => Ok(Identity::authenticated(Principal {
                trust_domain: "cluster.local".into(),
                namespace: "a".into(),
                service_account: "web".into(),
                method: AuthMethod::Jwt,
            })),
            Some(_) => Err(AuthnError::Rejected {
                authenticator: self.name(),
                reason: "token not recognised".into(),
            }),
            None => Err(AuthnError::Missing("no bearer token")),
        }
    }
}

fn authenticated_service() -> (AdsService, watch::Sender<Arc<PushContext>>) {
    let (tx, rx) = watch::channel(Arc::new(PushContext::empty()));
    let mut registry = prometheus_client::registry::Registry::default();
    let server = crate::ads::XdsServer::new(
        XdsConfig::default(),
        Arc::new(Generator::new()),
        rx,
        &mut registry,
    );
    (server.secure_ads_service(Arc::new(GoodToken)), tx)
}

#[tokio::test]
async fn the_bearer_token_reaches_the_authenticator_and_its_identity_the_proxy() {
    let (mut svc, _snapshots) = authenticated_service();
    let (tx, mut req) = request(SOTW_PATH);
    req.headers_mut()
        .insert(AUTHORIZATION, HeaderValue::from_static("Bearer good"));
    tx.send(chunk(&first_sotw())).await.unwrap();
    let conn = served(&mut svc, req).await;
    assert_eq!(
        conn.proxy.identity.to_string(),
        "spiffe://cluster.local/ns/a/sa/web (jwt)"
    );
}

#[tokio::test]
async fn a_stream_the_authenticator_refuses_is_unauthenticated_with_its_reason() {
    let (mut svc, _snapshots) = authenticated_service();
    for token in [None, Some("Bearer bad")] {
        let (tx, mut req) = request(SOTW_PATH);
        if let Some(token) = token {
            req.headers_mut()
                .insert(AUTHORIZATION, HeaderValue::from_static(token));
        }
        tx.send(chunk(&first_sotw())).await.unwrap();
        let status = refusal(&svc.call(req).await.unwrap());
        assert_eq!(status.code(), Code::Unauthenticated, "{status}");
        let reason = if token.is_some() {
            "not recognised"
        } else {
            "no bearer token"
        };
        assert!(status.message().contains(reason), "{status}");
    }
    assert!(svc.shared.registry.proxy(NODE).is_none());
}

#[tokio::test]
async fn plaintext_streams_are_anonymous_whatever_they_present() {
    let (mut svc, _snapshots) = service(XdsConfig::default());
    let (tx, mut req) = request(SOTW_PATH);
    req.headers_mut()
        .insert(AUTHORIZATION, HeaderValue::from_static("Bearer anything"));
    tx.send(chunk(&first_sotw())).await.unwrap();
    let conn = served(&mut svc, req).await;
    assert_eq!(conn.proxy.identity, Identity::Anonymous);
}

/// A first request from `node_id`, with node metadata `SERVICE_ACCOUNT` when given.
fn first_from(node_id: &str, service_account: Option<&str>) -> DiscoveryRequest {
    use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
    let metadata = service_account.map(|sa| Struct {
        fields: [(
            "SERVICE_ACCOUNT".to_string(),
            Value {
                kind: Some(Kind::StringValue(sa.into())),
            },
        )]
        .into(),
    });
    DiscoveryRequest {
        node: Some(Node {
            id: node_id.into(),
            metadata,
            ..Default::default()
        }),
        type_url: CLUSTER.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_node_claiming_another_namespace_or_service_account_is_permission_denied() {
    let (mut svc, _snapshots) = authenticated_service();
    for (node, sa, claim) in [
        (
            "sidecar~10.0.0.1~web-1.b~b.svc.cluster.local",
            None,
            r#"namespace "b""#,
        ),
        (NODE, Some("admin"), r#"service account "admin""#),
    ] {
        let (tx, mut req) = request(SOTW_PATH);
        req.headers_mut()
            .insert(AUTHORIZATION, HeaderValue::from_static("Bearer good"));
        tx.send(chunk(&first_from(node, sa))).await.unwrap();
        let status = refusal(&svc.call(req).await.unwrap());
        assert_eq!(status.code(), Code::PermissionDenied, "{status}");
        assert!(status.message().contains(claim), "{status}");
        assert!(
            status
                .message()
                .contains("spiffe://cluster.local/ns/a/sa/web"),
            "{status}"
        );
    }
    // Its own service account passes.
    let (tx, mut req) = request(SOTW_PATH);
    req.headers_mut()
        .insert(AUTHORIZATION, HeaderValue::from_static("Bearer good"));
    tx.send(chunk(&first_from(NODE, Some("web"))))
        .await
        .unwrap();
    let resp = svc.call(req).await.unwrap();
    assert!(resp.headers().get("grpc-status").is_none());
}

/// Proves nothing and says so without refusing: what a plaintext authenticator does.
struct ProvesNothing;

#[async_trait::async_trait]
impl Authenticator for ProvesNothing {
    fn name(&self) -> &'static str {
        "proves-nothing"
    }

    async fn authenticate(&self, _: &Credentials) -> Result<Identity, AuthnError> {
        Ok(Identity::Anonymous)
    }
}

#[tokio::test]
async fn the_secure_listener_refuses_a_stream_that_proves_nothing() {
    let (tx, rx) = watch::channel(Arc::new(PushContext::empty()));
    let mut registry = prometheus_client::registry::Registry::default();
    let server = crate::ads::XdsServer::new(
        XdsConfig::default(),
        Arc::new(Generator::new()),
        rx,
        &mut registry,
    );
    let mut svc = server.secure_ads_service(Arc::new(ProvesNothing));
    let (req_tx, req) = request(SOTW_PATH);
    req_tx.send(chunk(&first_sotw())).await.unwrap();
    let status = refusal(&svc.call(req).await.unwrap());
    assert_eq!(status.code(), Code::Unauthenticated, "{status}");
    assert!(status.message().contains("only authenticated"), "{status}");
    drop(tx);
}

/// A relay header on a stream whose peer is not an edge: plaintext, or a TLS client
/// certificate of a workload.
#[tokio::test]
async fn relay_headers_from_anything_but_an_edge_are_permission_denied() {
    use crate::tls::PeerInfo;
    use shoal_proto::security::SpiffeId;
    let (mut plain, _s1) = service(XdsConfig::default());
    let (mut secure, _s2) = authenticated_service();
    let workload = PeerInfo {
        spiffe: Some(SpiffeId::new("cluster.local", "a", "web")),
        ..Default::default()
    };
    for (svc, peer, presented) in [
        (&mut plain, None, "a plaintext stream"),
        (
            &mut secure,
            Some(workload),
            "a client certificate for spiffe://cluster.local/ns/a/sa/web",
        ),
    ] {
        for header in ["x-shoal-relayed-by", "x-shoal-relayed-identity"] {
            let (tx, mut req) = request(SOTW_PATH);
            req.headers_mut()
                .insert(header, HeaderValue::from_static("edge-evil"));
            req.headers_mut()
                .insert(AUTHORIZATION, HeaderValue::from_static("Bearer good"));
            if let Some(peer) = peer.clone() {
                req.extensions_mut().insert(peer);
            }
            tx.send(chunk(&first_sotw())).await.unwrap();
            let status = refusal(&svc.call(req).await.unwrap());
            assert_eq!(status.code(), Code::PermissionDenied, "{status}");
            assert!(status.message().contains(presented), "{status}");
        }
    }
}

#[tokio::test]
async fn an_edge_peer_relays_the_identity_it_authenticated() {
    use crate::tls::PeerInfo;
    let (mut svc, _snapshots) = authenticated_service();
    let (tx, mut req) = request(SOTW_PATH);
    req.extensions_mut().insert(PeerInfo {
        spiffe: Some(crate::ads::config::default_edge_identity()),
        ..Default::default()
    });
    req.headers_mut()
        .insert("x-shoal-relayed-by", HeaderValue::from_static("edge-1"));
    req.headers_mut().insert(
        "x-shoal-relayed-identity",
        HeaderValue::from_static("spiffe://cluster.local/ns/a/sa/web;jwt"),
    );
    tx.send(chunk(&first_sotw())).await.unwrap();
    let conn = served(&mut svc, req).await;
    assert_eq!(
        conn.proxy.identity.to_string(),
        "spiffe://cluster.local/ns/a/sa/web (jwt)"
    );
}
