//! The mesh's mTLS as gRPC takes it (gRFC A29): gRPC does not speak SDS, so where a
//! sidecar's contexts name the agent's SDS secrets, these name certificate provider
//! instances of the client's own bootstrap (`certificate_providers`, which Istio's agent
//! writes as a `file_watcher` over the certificate files it keeps up to date): the
//! workload certificate `default` and the root `ROOTCA` of instance `default`.
//!
//! gRPC NACKs what it cannot honour safely, so these set nothing else: no `tls_params`,
//! no SDS, no CRL; SANs only on the client side (a server would NACK them), as the
//! deprecated `match_subject_alt_names` that gRPC reads. The deprecated provider fields
//! are set beside the current ones, as Istio does, for gRPC releases before 1.66.

use crate::xds::security::mesh_tls::{ROOT_SECRET, WORKLOAD_SECRET, tls_socket};
use envoy_types::pb::envoy::config::core::v3::TransportSocket;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateProviderPluginInstance, CertificateValidationContext, CommonTlsContext,
    DownstreamTlsContext, UpstreamTlsContext, common_tls_context,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
use envoy_types::pb::google::protobuf::BoolValue;

/// The certificate provider instance the contexts name (Istio's agent writes this one).
pub const PROVIDER_INSTANCE: &str = "default";

fn plugin(certificate: &str) -> CertificateProviderPluginInstance {
    CertificateProviderPluginInstance {
        instance_name: PROVIDER_INSTANCE.into(),
        certificate_name: certificate.into(),
    }
}

#[allow(deprecated)] // Older gRPC reads only the deprecated provider fields.
fn common(peer_spiffe_ids: &[String]) -> CommonTlsContext {
    let deprecated = |certificate: &str| common_tls_context::CertificateProviderInstance {
        instance_name: PROVIDER_INSTANCE.into(),
        certificate_name: certificate.into(),
    };
    CommonTlsContext {
        tls_certificate_provider_instance: Some(plugin(WORKLOAD_SECRET)),
        tls_certificate_certificate_provider_instance: Some(deprecated(WORKLOAD_SECRET)),
        validation_context_type: Some(
            common_tls_context::ValidationContextType::CombinedValidationContext(
                common_tls_context::CombinedCertificateValidationContext {
                    default_validation_context: Some(CertificateValidationContext {
                        ca_certificate_provider_instance: Some(plugin(ROOT_SECRET)),
                        match_subject_alt_names: peer_spiffe_ids
                            .iter()
                            .map(|id| StringMatcher {
                                match_pattern: Some(string_matcher::MatchPattern::Exact(
                                    id.clone(),
                                )),
                                ignore_case: false,
                            })
                            .collect(),
                        ..Default::default()
                    }),
                    validation_context_certificate_provider_instance: Some(deprecated(ROOT_SECRET)),
                    ..Default::default()
                },
            ),
        ),
        ..Default::default()
    }
}

/// A gRPC client's mTLS to a mesh destination that must be one of `peer_spiffe_ids`
/// (any the root signed when empty).
pub fn upstream(peer_spiffe_ids: &[String]) -> TransportSocket {
    tls_socket(&UpstreamTlsContext {
        common_tls_context: Some(common(peer_spiffe_ids)),
        ..Default::default()
    })
}

/// A gRPC server's mTLS: its certificate, a client certificate required and verified
/// against the root.
pub fn downstream() -> TransportSocket {
    tls_socket(&DownstreamTlsContext {
        common_tls_context: Some(common(&[])),
        require_client_certificate: Some(BoolValue { value: true }),
        ..Default::default()
    })
}
