//! Direct gRPC clients of the secure port, as an attacker (or a misconfigured agent)
//! would be: TLS verified as the agent does, any token or none.

use crate::mesh::{ISTIOD_SAN, Mesh};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use shoal_proto::security::ca::api::{
    CREATE_CERTIFICATE_PATH, IstioCertificateRequest, IstioCertificateResponse,
};
use std::time::Duration;
use tonic::transport::Channel;
use tonic::{Code, Status};

pub const SECRET_TYPE: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

pub fn channel(mesh: &Mesh) -> Channel {
    let config = shoal_agent_stand_in::tls::client_config(&mesh.root_pem, ISTIOD_SAN)
        .expect("client TLS config");
    shoal_agent_stand_in::tls::channel(
        &format!("127.0.0.1:{}", mesh.secure_port),
        ISTIOD_SAN,
        config,
    )
    .expect("channel")
}

fn with_token<T>(msg: T, token: Option<&str>) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    if let Some(t) = token {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    req
}

/// `CreateCertificate` for a CSR naming `spiffe`, with `token`.
pub async fn create_certificate(
    mesh: &Mesh,
    spiffe: &str,
    token: Option<&str>,
) -> Result<Vec<String>, Status> {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.subject_alt_names = vec![rcgen::SanType::URI(spiffe.try_into().unwrap())];
    let csr = params.serialize_request(&key).unwrap().pem().unwrap();
    let mut grpc = tonic::client::Grpc::new(channel(mesh));
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let codec =
        tonic_prost::ProstCodec::<IstioCertificateRequest, IstioCertificateResponse>::default();
    grpc.unary(
        with_token(
            IstioCertificateRequest {
                csr,
                validity_duration: 3600,
            },
            token,
        ),
        http::uri::PathAndQuery::from_static(CREATE_CERTIFICATE_PATH),
        codec,
    )
    .await
    .map(|r| r.into_inner().cert_chain)
}

/// Opens SotW ADS as `node_id` with `token`, asks for `type_url` `names`: the first
/// response, or the status the stream ended with. `Ok(None)`: nothing within `wait`.
pub async fn ads_first_response(
    mesh: &Mesh,
    node_id: &str,
    namespace: &str,
    token: Option<&str>,
    type_url: &str,
    names: &[&str],
    wait: Duration,
) -> Result<Option<envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse>, Status> {
    let mut client = AggregatedDiscoveryServiceClient::new(channel(mesh));
    let node = Node {
        id: node_id.into(),
        cluster: "probe".into(),
        metadata: Some(envoy_types::pb::google::protobuf::Struct {
            fields: [(
                "NAMESPACE".to_string(),
                envoy_types::pb::google::protobuf::Value {
                    kind: Some(envoy_types::pb::google::protobuf::value::Kind::StringValue(
                        namespace.into(),
                    )),
                },
            )]
            .into(),
        }),
        ..Default::default()
    };
    let first = DiscoveryRequest {
        node: Some(node),
        type_url: type_url.into(),
        resource_names: names.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(first).await.unwrap();
    let outbound = tokio_stream::wrappers::ReceiverStream::new(rx);
    let call = async {
        let mut inbound = client
            .stream_aggregated_resources(with_token(outbound, token))
            .await?
            .into_inner();
        inbound.message().await
    };
    let out = match tokio::time::timeout(wait, call).await {
        Err(_) => Ok(None),
        Ok(Ok(resp)) => Ok(resp),
        Ok(Err(status)) => Err(status),
    };
    drop(tx);
    out
}

pub fn expect_code<T: std::fmt::Debug>(what: &str, r: Result<T, Status>, code: Code) -> Status {
    match r {
        Err(s) if s.code() == code => s,
        other => panic!("{what}: expected {code:?}, got {other:?}"),
    }
}
