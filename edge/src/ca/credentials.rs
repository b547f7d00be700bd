//! What a `CreateCertificate` caller presents: its bearer token and, over TLS, the
//! certificate chain the secure listener verified (its [`PeerInfo`]).

use crate::tls::PeerInfo;
use http::header::AUTHORIZATION;
use shoal_proto::security::Credentials;

/// The credentials of a request: `authorization: Bearer <token>` and the connection's
/// [`PeerInfo`] (tonic copies it into every request's extensions); plaintext callers
/// have no certificates.
pub fn request_credentials(
    metadata: &tonic::metadata::MetadataMap,
    extensions: &http::Extensions,
) -> Credentials {
    crate::tls::peer::credentials(
        metadata
            .get(AUTHORIZATION.as_str())
            .and_then(|v| v.to_str().ok()),
        extensions.get::<PeerInfo>(),
    )
}
