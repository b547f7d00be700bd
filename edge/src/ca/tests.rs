//! The CA over real gRPC: a tonic server on loopback serving [`CaService`], a tonic
//! client calling `CreateCertificate` as pilot-agent does, real CSRs and certificates.

use super::*;
use async_trait::async_trait;
use prometheus_client::registry::Registry;
use rcgen::{CertificateParams, DistinguishedName, KeyPair, SanType};
use shoal_proto::security::ca::api::{
    CREATE_CERTIFICATE_PATH, IstioCertificateRequest, IstioCertificateResponse,
};
use shoal_proto::security::ca::{CertPolicy, SigningMaterial};
use shoal_proto::security::{
    AuthMethod, Authenticator, AuthnError, Credentials, Identity, SpiffeId,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;
use tonic::Code;

/// Test double for the real authenticators (JWT / TokenReview, built elsewhere): maps
/// fixed bearer tokens to identities; anything else is refused, no token is missing.
struct StaticTokens(HashMap<&'static str, SpiffeId>);

#[async_trait]
impl Authenticator for StaticTokens {
    fn name(&self) -> &'static str {
        "static-tokens-test-double"
    }

    async fn authenticate(&self, c: &Credentials) -> Result<Identity, AuthnError> {
        let token = c
            .bearer_token
            .as_deref()
            .ok_or(AuthnError::Missing("no bearer token"))?;
        let id = self.0.get(token).ok_or_else(|| AuthnError::Rejected {
            authenticator: self.name(),
            reason: "unknown token".into(),
        })?;
        Ok(Identity::authenticated(
            id.clone().into_principal(AuthMethod::Jwt),
        ))
    }
}

fn web() -> SpiffeId {
    SpiffeId::new("cluster.local", "shop", "web")
}

fn csr_for(uri: &str) -> String {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.subject_alt_names = vec![SanType::URI(uri.to_string().try_into().unwrap())];
    params.serialize_request(&key).unwrap().pem().unwrap()
}

struct Ca {
    addr: std::net::SocketAddr,
    material: watch::Sender<Arc<SigningMaterial>>,
    registry: Arc<Registry>,
}

async fn start_ca() -> Ca {
    let material = SigningMaterial::self_signed(
        "cluster.local",
        Duration::from_secs(86_400 * 365),
        SystemTime::now(),
    )
    .unwrap();
    let (tx, rx) = watch::channel(Arc::new(material));
    let auth = StaticTokens(HashMap::from([("web-token", web())]));
    let mut registry = Registry::default();
    let service = CaService::new(Arc::new(auth), rx, CertPolicy::default(), &mut registry);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    Ca {
        addr,
        material: tx,
        registry: Arc::new(registry),
    }
}

async fn call(
    addr: std::net::SocketAddr,
    token: Option<&str>,
    csr: String,
    ttl: i64,
) -> Result<IstioCertificateResponse, tonic::Status> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let mut req = tonic::Request::new(IstioCertificateRequest {
        csr,
        validity_duration: ttl,
    });
    if let Some(t) = token {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    let codec =
        tonic_prost::ProstCodec::<IstioCertificateRequest, IstioCertificateResponse>::default();
    grpc.unary(
        req,
        http::uri::PathAndQuery::from_static(CREATE_CERTIFICATE_PATH),
        codec,
    )
    .await
    .map(tonic::Response::into_inner)
}

fn metrics_text(registry: &Registry) -> String {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
    out
}

fn leaf_uri(pem: &str) -> String {
    use x509_parser::prelude::*;
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let cert = block.parse_x509().unwrap();
    let san = cert.subject_alternative_name().unwrap().unwrap();
    match &san.value.general_names[..] {
        [GeneralName::URI(u)] => u.to_string(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_authenticated_caller_gets_a_certificate_for_its_identity_root_last() {
    let ca = start_ca().await;
    let resp = call(
        ca.addr,
        Some("web-token"),
        csr_for(&web().to_string()),
        3600,
    )
    .await
    .unwrap();
    assert_eq!(resp.cert_chain.len(), 2);
    assert_eq!(leaf_uri(&resp.cert_chain[0]), web().to_string());
    assert_eq!(resp.cert_chain[1], ca.material.borrow().root_bundle_pem());
    let text = metrics_text(&ca.registry);
    assert!(text.contains("citadel_server_csr_count_total 1"), "{text}");
    assert!(
        text.contains("citadel_server_success_cert_issuance_count_total 1"),
        "{text}"
    );
}

#[tokio::test]
async fn callers_without_valid_credentials_are_unauthenticated() {
    let ca = start_ca().await;
    for token in [None, Some("stolen")] {
        let err = call(ca.addr, token, csr_for(&web().to_string()), 0)
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
        assert!(
            err.message().contains("request authenticate failure"),
            "{err:?}"
        );
        assert!(
            !err.message().contains("stolen"),
            "no token in the answer: {err:?}"
        );
    }
    let text = metrics_text(&ca.registry);
    assert!(
        text.contains("citadel_server_authentication_failure_count_total 2"),
        "{text}"
    );
}

#[tokio::test]
async fn a_csr_for_another_identity_is_invalid_naming_both() {
    let ca = start_ca().await;
    let other = "spiffe://cluster.local/ns/bank/sa/vault";
    let err = call(ca.addr, Some("web-token"), csr_for(other), 0)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().contains(other) && err.message().contains(&web().to_string()),
        "{err:?}"
    );
    let err = call(ca.addr, Some("web-token"), "garbage".into(), 0)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    let err = call(
        ca.addr,
        Some("web-token"),
        csr_for(&web().to_string()),
        200 * 86_400,
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("max allowed TTL"), "{err:?}");
    let text = metrics_text(&ca.registry);
    assert!(
        text.contains("citadel_server_csr_sign_err_count_total{error=\"CSR_ERROR\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("citadel_server_csr_sign_err_count_total{error=\"TTL_ERROR\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn new_material_sent_on_the_watch_signs_the_next_request() {
    let ca = start_ca().await;
    let before = call(ca.addr, Some("web-token"), csr_for(&web().to_string()), 0)
        .await
        .unwrap();
    let next = SigningMaterial::self_signed(
        "cluster.local",
        Duration::from_secs(86_400),
        SystemTime::now(),
    )
    .unwrap();
    let next_root = next.root_bundle_pem().to_string();
    ca.material.send(Arc::new(next)).unwrap();
    let after = call(ca.addr, Some("web-token"), csr_for(&web().to_string()), 0)
        .await
        .unwrap();
    assert_ne!(before.cert_chain[1], after.cert_chain[1]);
    assert_eq!(after.cert_chain[1], next_root);
}

#[test]
fn credentials_come_from_metadata_and_the_peer_certificates_extension() {
    let mut metadata = tonic::metadata::MetadataMap::new();
    metadata.insert("authorization", "Bearer abc".parse().unwrap());
    let mut ext = http::Extensions::new();
    let none = request_credentials(&metadata, &ext);
    assert_eq!(none.bearer_token.as_deref(), Some("abc"));
    assert!(
        none.peer_certificates.is_empty(),
        "plaintext: no certificates"
    );
    ext.insert(crate::tls::PeerInfo {
        certificates: Arc::from(vec![bytes::Bytes::from_static(b"leaf")]),
        ..Default::default()
    });
    let with = request_credentials(&tonic::metadata::MetadataMap::new(), &ext);
    assert_eq!(with.bearer_token, None);
    assert_eq!(
        with.peer_certificates,
        vec![bytes::Bytes::from_static(b"leaf")]
    );
}
