//! The downstream TLS context of a gateway server: its certificate over SDS (or from
//! files on the gateway), and for MUTUAL the CA that verifies clients.

use super::credential_resource;
use super::secrets::CA_SUFFIX;
use crate::xds::util::{ads_config_source, any};
use envoy_types::pb::envoy::config::core::v3::{
    DataSource, TransportSocket, data_source, transport_socket,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, DownstreamTlsContext, SdsSecretConfig,
    SubjectAltNameMatcher, TlsCertificate, TlsParameters, common_tls_context,
    subject_alt_name_matcher, tls_parameters,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
use envoy_types::pb::google::protobuf::BoolValue;
use shoal_proto::config::istio::ServerTlsSettings;

/// The transport socket terminating TLS for a server; `alpn` lists the protocols
/// offered (`h2`, `http/1.1` for HTTPS; none for TLS then TCP).
pub fn downstream(tls: &ServerTlsSettings, alpn: &[&str]) -> TransportSocket {
    let mutual = matches!(tls.mode.as_str(), "MUTUAL" | "OPTIONAL_MUTUAL");
    let mut common = CommonTlsContext {
        alpn_protocols: alpn.iter().map(|p| p.to_string()).collect(),
        tls_params: tls_params(tls),
        ..Default::default()
    };
    let sds = |name: String| SdsSecretConfig {
        name,
        sds_config: Some(ads_config_source()),
    };
    if tls.credential_name.is_empty() {
        common.tls_certificates = vec![TlsCertificate {
            certificate_chain: file(&tls.server_certificate),
            private_key: file(&tls.private_key),
            ..Default::default()
        }];
    } else {
        common.tls_certificate_sds_secret_configs =
            vec![sds(credential_resource(&tls.credential_name))];
    }
    if mutual {
        let sans = CertificateValidationContext {
            match_typed_subject_alt_names: tls
                .subject_alt_names
                .iter()
                .map(|san| SubjectAltNameMatcher {
                    san_type: subject_alt_name_matcher::SanType::Dns as i32,
                    matcher: Some(StringMatcher {
                        match_pattern: Some(string_matcher::MatchPattern::Exact(san.clone())),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        common.validation_context_type = Some(if tls.credential_name.is_empty() {
            common_tls_context::ValidationContextType::ValidationContext(
                CertificateValidationContext {
                    trusted_ca: file(&tls.ca_certificates),
                    ..sans
                },
            )
        } else {
            common_tls_context::ValidationContextType::CombinedValidationContext(
                common_tls_context::CombinedCertificateValidationContext {
                    default_validation_context: Some(sans),
                    validation_context_sds_secret_config: Some(sds(format!(
                        "{}{CA_SUFFIX}",
                        credential_resource(&tls.credential_name)
                    ))),
                    ..Default::default()
                },
            )
        });
    }
    let context = DownstreamTlsContext {
        common_tls_context: Some(common),
        require_client_certificate: Some(BoolValue {
            value: tls.mode == "MUTUAL",
        }),
        ..Default::default()
    };
    TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&context))),
    }
}

fn file(path: &str) -> Option<DataSource> {
    (!path.is_empty()).then(|| DataSource {
        specifier: Some(data_source::Specifier::Filename(path.to_string())),
        ..Default::default()
    })
}

fn tls_params(tls: &ServerTlsSettings) -> Option<TlsParameters> {
    use tls_parameters::TlsProtocol;
    let version = |v: &str| match v {
        "TLSV1_0" => TlsProtocol::TlSv10,
        "TLSV1_1" => TlsProtocol::TlSv11,
        "TLSV1_2" => TlsProtocol::TlSv12,
        "TLSV1_3" => TlsProtocol::TlSv13,
        _ => TlsProtocol::TlsAuto,
    };
    let (min, max) = (
        version(&tls.min_protocol_version),
        version(&tls.max_protocol_version),
    );
    if min == TlsProtocol::TlsAuto && max == TlsProtocol::TlsAuto && tls.cipher_suites.is_empty() {
        return None;
    }
    Some(TlsParameters {
        tls_minimum_protocol_version: min as i32,
        tls_maximum_protocol_version: max as i32,
        cipher_suites: tls.cipher_suites.clone(),
        ..Default::default()
    })
}
