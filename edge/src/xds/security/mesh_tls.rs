//! The mesh's mutual TLS, as Istio's sidecars speak it: the workload certificate
//! (`default`) and the mesh root (`ROOTCA`) served to Envoy over SDS by the proxy's agent
//! on the bootstrap's `sds-grpc` cluster, never by the control plane (the key stays on the
//! workload's node); peers verified against the root and, outbound, the destination's
//! SPIFFE IDs.

use crate::xds::util::{any, duration};
use envoy_types::pb::envoy::config::core::v3::{
    ApiConfigSource, ApiVersion, ConfigSource, GrpcService, TransportSocket, api_config_source,
    config_source, grpc_service, transport_socket,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, DownstreamTlsContext, SdsSecretConfig,
    SubjectAltNameMatcher, TlsParameters, UpstreamTlsContext, common_tls_context,
    subject_alt_name_matcher::SanType, tls_parameters::TlsProtocol,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
use envoy_types::pb::google::protobuf::BoolValue;

/// The agent's SDS cluster in an Istio bootstrap.
pub const SDS_CLUSTER: &str = "sds-grpc";
/// The workload certificate's SDS name.
pub const WORKLOAD_SECRET: &str = "default";
/// The mesh root's SDS name.
pub const ROOT_SECRET: &str = "ROOTCA";
pub const TLS_TRANSPORT_SOCKET: &str = "envoy.transport_sockets.tls";

/// ALPNs an Istio sidecar offers on mTLS, by what it carries (its inbound chains match
/// on them): HTTP/1.x, HTTP/2, and TCP.
pub const ISTIO_HTTP11_ALPN: &str = "istio-http/1.1";
pub const ISTIO_H2_ALPN: &str = "istio-h2";
/// TCP offers `istio` alone (istiod's `ALPNInMesh`, what it sends with the metadata
/// exchange off), never `istio-peer-exchange`: that ALPN promises Istio's metadata
/// exchange, which an istio-proxy server answers by writing its exchange header into the
/// connection, and a Shoal sidecar (upstream Envoy, no `istio.metadata_exchange` filter)
/// would hand those bytes to its app. Istio's inbound TCP chains match `istio` too.
pub const ISTIO_TCP_ALPNS: [&str; 1] = ["istio"];
/// What an inbound mTLS HTTP chain matches (istio-http/1.0 too, as Istio's).
pub const ISTIO_HTTP_ALPNS: [&str; 3] = ["istio-http/1.0", "istio-http/1.1", "istio-h2"];

fn sds(name: &str) -> SdsSecretConfig {
    SdsSecretConfig {
        name: name.into(),
        sds_config: Some(ConfigSource {
            resource_api_version: ApiVersion::V3 as i32,
            // Wait for the agent however long it takes: a chain without its certificate
            // is not served.
            initial_fetch_timeout: Some(duration(std::time::Duration::ZERO)),
            config_source_specifier: Some(config_source::ConfigSourceSpecifier::ApiConfigSource(
                ApiConfigSource {
                    api_type: api_config_source::ApiType::Grpc as i32,
                    transport_api_version: ApiVersion::V3 as i32,
                    set_node_on_first_message_only: true,
                    grpc_services: vec![GrpcService {
                        target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                            grpc_service::EnvoyGrpc {
                                cluster_name: SDS_CLUSTER.into(),
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

/// The certificate, the root, and the SPIFFE IDs a peer's certificate must name (none:
/// any the root signed).
fn common(peer_spiffe_ids: &[String], alpns: &[&str]) -> CommonTlsContext {
    CommonTlsContext {
        tls_params: Some(TlsParameters {
            tls_minimum_protocol_version: TlsProtocol::TlSv12 as i32,
            tls_maximum_protocol_version: TlsProtocol::TlSv13 as i32,
            ..Default::default()
        }),
        alpn_protocols: alpns.iter().map(|a| a.to_string()).collect(),
        tls_certificate_sds_secret_configs: vec![sds(WORKLOAD_SECRET)],
        validation_context_type: Some(
            common_tls_context::ValidationContextType::CombinedValidationContext(
                common_tls_context::CombinedCertificateValidationContext {
                    default_validation_context: Some(CertificateValidationContext {
                        match_typed_subject_alt_names: peer_spiffe_ids
                            .iter()
                            .map(|id| SubjectAltNameMatcher {
                                san_type: SanType::Uri as i32,
                                matcher: Some(StringMatcher {
                                    match_pattern: Some(string_matcher::MatchPattern::Exact(
                                        id.clone(),
                                    )),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    }),
                    validation_context_sds_secret_config: Some(sds(ROOT_SECRET)),
                    ..Default::default()
                },
            ),
        ),
        ..Default::default()
    }
}

/// The TLS transport socket carrying `context` (the only name gRPC reads it from too).
pub(crate) fn tls_socket(context: &impl prost::Name) -> TransportSocket {
    TransportSocket {
        name: TLS_TRANSPORT_SOCKET.into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(context))),
    }
}

/// What a sidecar presents to a mesh destination (Istio's ISTIO_MUTUAL): its workload
/// certificate, `sni`, the ALPNs of what it carries; the destination must be one of
/// `peer_spiffe_ids` (when any are known).
pub fn upstream(sni: &str, peer_spiffe_ids: &[String], alpns: &[&str]) -> TransportSocket {
    tls_socket(&UpstreamTlsContext {
        common_tls_context: Some(common(peer_spiffe_ids, alpns)),
        sni: sni.into(),
        ..Default::default()
    })
}

/// What a sidecar's inbound mTLS chain terminates with: its workload certificate, a
/// client certificate required and verified against the mesh root.
pub fn downstream(alpns: &[&str]) -> TransportSocket {
    tls_socket(&DownstreamTlsContext {
        common_tls_context: Some(common(&[], alpns)),
        require_client_certificate: Some(BoolValue { value: true }),
        ..Default::default()
    })
}
