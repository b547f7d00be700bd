//! SDS: gateways' TLS certificates and client CAs from Kubernetes Secrets in the
//! router's own namespace (Istio serves a gateway only its namespace's credentials).

use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, Secret, TlsCertificate, secret,
};
use shoal_proto::config::k8s::SecretSpec;
use shoal_proto::push_context::ConfigIndex;

pub const KUBERNETES_PREFIX: &str = "kubernetes://";
/// Suffix of the resource for a credential's CA, which verifies client certificates
/// (MUTUAL): from the Secret `<name>-cacert`, else the `ca.crt` of `<name>` itself.
pub const CA_SUFFIX: &str = "-cacert";

/// The secret named `name` for a router in `namespace`, if its Secret exists and has
/// the material asked for.
pub fn secret(index: &ConfigIndex, namespace: &str, name: &str) -> Option<Secret> {
    let credential = name.strip_prefix(KUBERNETES_PREFIX)?;
    let lookup = |n: &str| {
        index
            .credentials
            .get(&(namespace.to_string(), n.to_string()))
    };
    let kind = match lookup(credential) {
        Some(spec) if !spec.cert_chain.is_empty() => certificate(spec),
        found => {
            let base = credential.strip_suffix(CA_SUFFIX)?;
            let ca = found
                .filter(|s| !s.ca_cert.is_empty())
                .or_else(|| lookup(base).filter(|s| !s.ca_cert.is_empty()))?;
            validation(ca)
        }
    };
    Some(Secret {
        name: name.to_string(),
        r#type: Some(kind),
    })
}

/// Whether the credential a server names can be served: Istio leaves out a server
/// whose certificate is missing rather than keep the whole listener warming.
pub fn has_certificate(index: &ConfigIndex, namespace: &str, credential: &str) -> bool {
    index
        .credentials
        .get(&(namespace.to_string(), credential.to_string()))
        .is_some_and(|s| !s.cert_chain.is_empty())
}

fn inline(pem: &str) -> Option<DataSource> {
    Some(DataSource {
        specifier: Some(data_source::Specifier::InlineString(pem.to_string())),
        ..Default::default()
    })
}

fn certificate(spec: &SecretSpec) -> secret::Type {
    secret::Type::TlsCertificate(TlsCertificate {
        certificate_chain: inline(&spec.cert_chain),
        private_key: inline(&spec.private_key),
        ..Default::default()
    })
}

fn validation(spec: &SecretSpec) -> secret::Type {
    secret::Type::ValidationContext(CertificateValidationContext {
        trusted_ca: inline(&spec.ca_cert),
        ..Default::default()
    })
}
