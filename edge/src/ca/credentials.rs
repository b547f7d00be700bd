//! What a `CreateCertificate` caller presents: its bearer token and, over TLS, its
//! certificate chain.

use bytes::Bytes;
use http::header::AUTHORIZATION;
use shoal_proto::security::Credentials;
use std::sync::Arc;

/// The client's certificate chain (DER, leaf first) as the TLS listener that accepted
/// the connection verified it. The secure (15012) server puts it in each request's
/// extensions: tonic copies a connection's `Connected::ConnectInfo` into every request's
/// extensions, so a TLS stream whose `ConnectInfo` is (or a layer that inserts) this
/// type is enough. Plaintext callers have none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerCertificates(pub Arc<[Bytes]>);

/// The credentials of a request: `authorization: Bearer <token>` and the
/// [`PeerCertificates`] extension, when present.
pub fn request_credentials(
    metadata: &tonic::metadata::MetadataMap,
    extensions: &http::Extensions,
) -> Credentials {
    Credentials {
        bearer_token: metadata
            .get(AUTHORIZATION.as_str())
            .and_then(|v| v.to_str().ok())
            .and_then(Credentials::bearer),
        peer_certificates: extensions
            .get::<PeerCertificates>()
            .map(|p| p.0.to_vec())
            .unwrap_or_default(),
    }
}
