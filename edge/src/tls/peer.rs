//! What a verified certificate names: its SPIFFE ID (URI SAN).

use super::PeerInfo;
use shoal_proto::security::{Credentials, SpiffeId};
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

/// What a request presents: the bearer token of its `authorization` value and, over TLS,
/// the client certificate chain the handshake verified against the mesh root (`peer`,
/// the connection's [`PeerInfo`]). One reading for ADS streams and CA requests.
pub fn credentials(authorization: Option<&str>, peer: Option<&PeerInfo>) -> Credentials {
    Credentials {
        bearer_token: authorization.and_then(Credentials::bearer),
        peer_certificates: peer.map(|p| p.certificates.to_vec()).unwrap_or_default(),
    }
}
