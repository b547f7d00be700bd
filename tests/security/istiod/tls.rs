//! The mesh's mTLS as istiod writes it (`pilot/pkg/networking/core/cluster_tls.go` for
//! ISTIO_MUTUAL, `pilot/pkg/security/authn` for the inbound side): the workload
//! certificate `default` and the root `ROOTCA` over SDS from the agent (`sds-grpc`),
//! peers' SPIFFE IDs checked outbound, any mesh certificate accepted inbound.

use super::any;
use envoy_types::pb::envoy::config::core::v3::{
    ApiConfigSource, ApiVersion, ConfigSource, GrpcService, TransportSocket, api_config_source,
    config_source, grpc_service, transport_socket,
};
use envoy_types::pb::envoy::extensions::transport_sockets::raw_buffer::v3::RawBuffer;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, DownstreamTlsContext, SdsSecretConfig,
    SubjectAltNameMatcher, TlsParameters, UpstreamTlsContext, common_tls_context,
    subject_alt_name_matcher::SanType, tls_parameters::TlsProtocol,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
use envoy_types::pb::google::protobuf::{BoolValue, Duration};

/// istiod's `ALPNInMeshWithMxc`: what an ISTIO_MUTUAL cluster offers (Istio's ALPN HTTP
/// filter overrides it per request for HTTP, see [`super::listeners`]).
pub const ALPN_IN_MESH_WITH_MXC: [&str; 2] = ["istio-peer-exchange", "istio"];
/// What istiod's inbound mTLS HTTP chain offers back (`ALPNDownstreamWithMxc`).
pub const ALPN_DOWNSTREAM_WITH_MXC: [&str; 3] = ["istio-peer-exchange", "h2", "http/1.1"];

fn sds(name: &str) -> SdsSecretConfig {
    SdsSecretConfig {
        name: name.into(),
        sds_config: Some(ConfigSource {
            resource_api_version: ApiVersion::V3 as i32,
            // As istiod: wait for the agent's secret however long it takes.
            initial_fetch_timeout: Some(Duration::default()),
            config_source_specifier: Some(config_source::ConfigSourceSpecifier::ApiConfigSource(
                ApiConfigSource {
                    api_type: api_config_source::ApiType::Grpc as i32,
                    transport_api_version: ApiVersion::V3 as i32,
                    set_node_on_first_message_only: true,
                    grpc_services: vec![GrpcService {
                        target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                            grpc_service::EnvoyGrpc {
                                cluster_name: "sds-grpc".into(),
                                ..Default::default()
                            },
                        )),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            )),
            ..Default::default()
        }),
    }
}

fn common(sans: &[String], alpns: &[&str]) -> CommonTlsContext {
    let san = |id: &String| SubjectAltNameMatcher {
        san_type: SanType::Uri as i32,
        matcher: Some(StringMatcher {
            match_pattern: Some(string_matcher::MatchPattern::Exact(id.clone())),
            ..Default::default()
        }),
        ..Default::default()
    };
    CommonTlsContext {
        tls_params: Some(TlsParameters {
            tls_minimum_protocol_version: TlsProtocol::TlSv12 as i32,
            tls_maximum_protocol_version: TlsProtocol::TlSv13 as i32,
            ..Default::default()
        }),
        alpn_protocols: alpns.iter().map(|a| a.to_string()).collect(),
        tls_certificate_sds_secret_configs: vec![sds("default")],
        validation_context_type: Some(
            common_tls_context::ValidationContextType::CombinedValidationContext(
                common_tls_context::CombinedCertificateValidationContext {
                    default_validation_context: Some(CertificateValidationContext {
                        match_typed_subject_alt_names: sans.iter().map(san).collect(),
                        ..Default::default()
                    }),
                    validation_context_sds_secret_config: Some(sds("ROOTCA")),
                    ..Default::default()
                },
            ),
        ),
        ..Default::default()
    }
}

/// ISTIO_MUTUAL toward `outbound_.<port>_._.<host>` (istiod's SNI), the destination's
/// `sans`.
pub fn istio_mutual(port: u16, host: &str, sans: &[String]) -> TransportSocket {
    tls_socket(any(&UpstreamTlsContext {
        common_tls_context: Some(common(sans, &ALPN_IN_MESH_WITH_MXC)),
        sni: format!("outbound_.{port}_._.{host}"),
        ..Default::default()
    }))
}

/// The inbound mTLS termination: client certificate required, any the root signed.
pub fn inbound_mutual(alpns: &[&str]) -> TransportSocket {
    tls_socket(any(&DownstreamTlsContext {
        common_tls_context: Some(common(&[], alpns)),
        require_client_certificate: Some(BoolValue { value: true }),
        ..Default::default()
    }))
}

pub fn raw_buffer() -> TransportSocket {
    TransportSocket {
        name: "envoy.transport_sockets.raw_buffer".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(
            &RawBuffer::default(),
        ))),
    }
}

fn tls_socket(config: envoy_types::pb::google::protobuf::Any) -> TransportSocket {
    TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(config)),
    }
}
