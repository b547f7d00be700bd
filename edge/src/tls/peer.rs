//! What a verified certificate names: its SPIFFE ID (URI SAN).

use shoal_proto::security::{
    AuthMethod, Authenticator, AuthnError, Credentials, Identity, SpiffeId,
};
use x509_parser::extensions::GeneralName;

/// The workload SPIFFE ID among the URI SANs of the certificate `der`; `None` when it has
/// none or does not parse. Only ever asked of a certificate TLS verified against the
/// mesh root.
pub fn spiffe_id(der: &[u8]) -> Option<SpiffeId> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let san = cert.subject_alternative_name().ok()??;
    san.value.general_names.iter().find_map(|name| match name {
        GeneralName::URI(uri) => SpiffeId::parse(uri).ok(),
        _ => None,
    })
}

/// The identity of a client certificate the TLS handshake verified against the mesh root
/// (the only way [`Credentials::peer_certificates`] is filled here): the SPIFFE ID of its
/// leaf, in this trust domain. The edge binary's authenticator for the secure listener
/// until token authenticators are wired in beside it.
#[derive(Clone, Debug)]
pub struct VerifiedClientCertificate {
    pub trust_domain: String,
}

#[async_trait::async_trait]
impl Authenticator for VerifiedClientCertificate {
    fn name(&self) -> &'static str {
        "client-certificate"
    }

    async fn authenticate(&self, credentials: &Credentials) -> Result<Identity, AuthnError> {
        let leaf = credentials
            .peer_certificates
            .first()
            .ok_or(AuthnError::Missing("no client certificate"))?;
        let rejected = |reason: String| AuthnError::Rejected {
            authenticator: self.name(),
            reason,
        };
        let id = spiffe_id(leaf)
            .ok_or_else(|| rejected("the client certificate names no SPIFFE ID".into()))?;
        if id.trust_domain != self.trust_domain {
            return Err(rejected(format!(
                "{id} is not of trust domain {:?}",
                self.trust_domain
            )));
        }
        Ok(Identity::authenticated(
            id.into_principal(AuthMethod::ClientCertificate),
        ))
    }
}
