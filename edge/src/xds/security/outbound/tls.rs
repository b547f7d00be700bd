//! TLS a sidecar originates to a destination (`trafficPolicy.tls`), as Istio's
//! `cluster_tls.go` builds it for SIMPLE and MUTUAL: an `UpstreamTlsContext` with TLS
//! 1.2–1.3, the client certificate for MUTUAL, the server verified against
//! `caCertificates` (the system roots without them) and `subjectAltNames`, and the SNI
//! given, or else taken from each request's host (`auto_sni`, with the certificate then
//! checked against it: `auto_san_validation`).
//!
//! The certificate paths are files on the proxy. Istio's agent serves them to Envoy
//! over SDS; Shoal has no agent, so Envoy reads (and watches) the files itself.
//!
//! DISABLE and `credentialName` (gateways only; Istio's sidecars originate no TLS for
//! it) originate nothing here; validation reports the latter on the object. ISTIO_MUTUAL
//! is the mesh's mTLS ([`super::super::mesh_tls`]).

use crate::xds::util::any;
use envoy_types::pb::envoy::config::core::v3::{
    DataSource, TransportSocket, UpstreamHttpProtocolOptions, data_source, transport_socket,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, SubjectAltNameMatcher, TlsCertificate,
    TlsParameters, UpstreamTlsContext, common_tls_context, subject_alt_name_matcher::SanType,
    tls_parameters::TlsProtocol,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
use shoal_proto::config::istio::ClientTlsSettings;

const TLS_TRANSPORT_SOCKET: &str = "envoy.transport_sockets.tls";

/// What originating TLS adds to a cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct UpstreamTls {
    pub transport_socket: TransportSocket,
    /// SNI and SAN checks from the request's host, for the HTTP protocol options; `None`
    /// when the rule names the SNI.
    pub auto: Option<UpstreamHttpProtocolOptions>,
}

/// The TLS a cluster originates under `tls`; `None` for plaintext. `h2`: the cluster
/// speaks HTTP/2, which is then advertised with ALPN.
pub fn upstream_tls(tls: Option<&ClientTlsSettings>, h2: bool) -> Option<UpstreamTls> {
    let tls = tls?;
    let mutual = match tls.mode.as_deref() {
        Some("SIMPLE") => false,
        Some("MUTUAL") => true,
        _ => return None,
    };
    if !tls.credential_name.is_empty() {
        return None;
    }
    let insecure = tls.insecure_skip_verify == Some(true);
    let mut common = CommonTlsContext {
        tls_params: Some(TlsParameters {
            tls_minimum_protocol_version: TlsProtocol::TlSv12 as i32,
            tls_maximum_protocol_version: TlsProtocol::TlSv13 as i32,
            ..Default::default()
        }),
        validation_context_type: Some(
            common_tls_context::ValidationContextType::ValidationContext(validation(tls)),
        ),
        ..Default::default()
    };
    if mutual {
        common.tls_certificates.push(TlsCertificate {
            certificate_chain: Some(file(&tls.client_certificate)),
            private_key: Some(file(&tls.private_key)),
            ..Default::default()
        });
    }
    if h2 {
        common.alpn_protocols = vec!["h2".into()];
    }
    let context = UpstreamTlsContext {
        common_tls_context: Some(common),
        sni: tls.sni.clone(),
        ..Default::default()
    };
    // As Istio: the request's host as SNI when none is named, and the certificate checked
    // against it when no SAN is named either (unless verification is skipped).
    let auto_sni = tls.sni.is_empty();
    let auto_san_validation = auto_sni && tls.subject_alt_names.is_empty() && !insecure;
    Some(UpstreamTls {
        transport_socket: TransportSocket {
            name: TLS_TRANSPORT_SOCKET.into(),
            config_type: Some(transport_socket::ConfigType::TypedConfig(any(&context))),
        },
        auto: auto_sni.then(|| UpstreamHttpProtocolOptions {
            auto_sni,
            auto_san_validation,
            ..Default::default()
        }),
    })
}

/// How the server's certificate is checked: not at all with `insecureSkipVerify`, else
/// against `caCertificates` (the system roots without) and the SANs named.
fn validation(tls: &ClientTlsSettings) -> CertificateValidationContext {
    if tls.insecure_skip_verify == Some(true) {
        return CertificateValidationContext::default();
    }
    let mut v = CertificateValidationContext {
        match_typed_subject_alt_names: tls.subject_alt_names.iter().map(|s| san(s)).collect(),
        ..Default::default()
    };
    if tls.ca_certificates.is_empty() {
        v.system_root_certs = Some(Default::default());
    } else {
        v.trusted_ca = Some(file(&tls.ca_certificates));
    }
    if !tls.ca_crl.is_empty() {
        v.crl = Some(file(&tls.ca_crl));
    }
    v
}

/// An exact SAN, typed by its form: an IP, a URI (`spiffe://...`), an email, else DNS.
fn san(value: &str) -> SubjectAltNameMatcher {
    let san_type = if value.parse::<std::net::IpAddr>().is_ok() {
        SanType::IpAddress
    } else if value.contains("://") {
        SanType::Uri
    } else if value.contains('@') {
        SanType::Email
    } else {
        SanType::Dns
    };
    SubjectAltNameMatcher {
        san_type: san_type as i32,
        matcher: Some(StringMatcher {
            match_pattern: Some(string_matcher::MatchPattern::Exact(value.to_string())),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn file(path: &str) -> DataSource {
    DataSource {
        specifier: Some(data_source::Specifier::Filename(path.to_string())),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn settings(mode: &str) -> ClientTlsSettings {
        ClientTlsSettings {
            mode: Some(mode.into()),
            ..Default::default()
        }
    }

    fn context(t: &UpstreamTls) -> UpstreamTlsContext {
        let Some(transport_socket::ConfigType::TypedConfig(any)) = &t.transport_socket.config_type
        else {
            panic!("no typed config");
        };
        UpstreamTlsContext::decode(any.value.as_slice()).unwrap()
    }

    fn validation_of(c: &UpstreamTlsContext) -> CertificateValidationContext {
        match c
            .common_tls_context
            .as_ref()
            .unwrap()
            .validation_context_type
            .clone()
        {
            Some(common_tls_context::ValidationContextType::ValidationContext(v)) => v,
            other => panic!("unexpected validation {other:?}"),
        }
    }

    #[test]
    fn plaintext_modes_originate_nothing() {
        assert_eq!(upstream_tls(None, false), None);
        for mode in ["DISABLE", "ISTIO_MUTUAL"] {
            assert_eq!(upstream_tls(Some(&settings(mode)), false), None, "{mode}");
        }
        let with_credential = ClientTlsSettings {
            credential_name: "egress-cert".into(),
            ..settings("SIMPLE")
        };
        assert_eq!(upstream_tls(Some(&with_credential), false), None);
    }

    #[test]
    fn simple_with_ca_sni_and_sans() {
        let tls = ClientTlsSettings {
            ca_certificates: "/etc/certs/ca.pem".into(),
            sni: "carts.example.com".into(),
            subject_alt_names: vec![
                "carts.example.com".into(),
                "spiffe://cluster.local/ns/a/sa/b".into(),
                "10.0.0.1".into(),
            ],
            ..settings("SIMPLE")
        };
        let t = upstream_tls(Some(&tls), false).unwrap();
        assert_eq!(t.transport_socket.name, TLS_TRANSPORT_SOCKET);
        assert_eq!(t.auto, None, "an explicit SNI turns auto SNI off");
        let c = context(&t);
        assert_eq!(c.sni, "carts.example.com");
        let common = c.common_tls_context.as_ref().unwrap();
        assert!(common.tls_certificates.is_empty());
        assert!(common.alpn_protocols.is_empty());
        let v = validation_of(&c);
        assert_eq!(v.trusted_ca, Some(file("/etc/certs/ca.pem")));
        assert_eq!(v.system_root_certs, None);
        let types: Vec<i32> = v
            .match_typed_subject_alt_names
            .iter()
            .map(|m| m.san_type)
            .collect();
        assert_eq!(
            types,
            [
                SanType::Dns as i32,
                SanType::Uri as i32,
                SanType::IpAddress as i32
            ]
        );
    }

    #[test]
    fn without_sni_the_request_host_is_sent_and_checked() {
        let t = upstream_tls(Some(&settings("SIMPLE")), true).unwrap();
        let auto = t.auto.clone().unwrap();
        assert!(auto.auto_sni && auto.auto_san_validation);
        let c = context(&t);
        assert_eq!(c.sni, "");
        assert_eq!(
            c.common_tls_context.as_ref().unwrap().alpn_protocols,
            ["h2"]
        );
        // No CA named: the system's roots.
        assert!(validation_of(&c).system_root_certs.is_some());

        // SANs named: checked instead of the host.
        let with_sans = ClientTlsSettings {
            subject_alt_names: vec!["a.example.com".into()],
            ..settings("SIMPLE")
        };
        let auto = upstream_tls(Some(&with_sans), false).unwrap().auto.unwrap();
        assert!(auto.auto_sni && !auto.auto_san_validation);
    }

    #[test]
    fn mutual_presents_the_client_certificate() {
        let tls = ClientTlsSettings {
            client_certificate: "/etc/certs/client.pem".into(),
            private_key: "/etc/certs/client.key".into(),
            ca_certificates: "/etc/certs/ca.pem".into(),
            ca_crl: "/etc/certs/crl.pem".into(),
            sni: "db".into(),
            ..settings("MUTUAL")
        };
        let c = context(&upstream_tls(Some(&tls), false).unwrap());
        let certs = &c.common_tls_context.as_ref().unwrap().tls_certificates;
        assert_eq!(certs.len(), 1);
        assert_eq!(
            certs[0].certificate_chain,
            Some(file("/etc/certs/client.pem"))
        );
        assert_eq!(certs[0].private_key, Some(file("/etc/certs/client.key")));
        assert_eq!(validation_of(&c).crl, Some(file("/etc/certs/crl.pem")));
    }

    #[test]
    fn insecure_skip_verify_checks_nothing() {
        let tls = ClientTlsSettings {
            insecure_skip_verify: Some(true),
            ..settings("SIMPLE")
        };
        let t = upstream_tls(Some(&tls), false).unwrap();
        let auto = t.auto.clone().unwrap();
        assert!(auto.auto_sni && !auto.auto_san_validation);
        assert_eq!(
            validation_of(&context(&t)),
            CertificateValidationContext::default()
        );
    }
}
