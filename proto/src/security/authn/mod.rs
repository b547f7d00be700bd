//! Authentication: what a stream presents when it opens, turned into an [`Identity`].
//!
//! Each way of proving an identity is a module implementing [`Authenticator`]:
//! [`Anonymous`] (plaintext ADS), [`ClientCertificate`] (the verified leaf's SPIFFE ID),
//! and [`Chain`], which tries several in order as istiod does. [`jwt`] is the pure JWT
//! verifier; the authenticators needing I/O (JWKS fetched from the issuer, Kubernetes
//! TokenReview) live in the edge (`shoal_edge::authn`) and implement this trait.

mod anonymous;
mod chain;
mod client_cert;
pub mod jwt;

pub use anonymous::Anonymous;
pub use chain::Chain;
pub use client_cert::ClientCertificate;

use super::identity::Identity;
use async_trait::async_trait;
use bytes::Bytes;

/// What a stream presents when it opens. Its `Debug` does not show the token.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// The token of the gRPC metadata `authorization: Bearer <token>`.
    pub bearer_token: Option<String>,
    /// The client's certificate chain (DER, leaf first); empty without TLS.
    pub peer_certificates: Vec<Bytes>,
}

impl Credentials {
    /// The bearer token of an `authorization` header value; `None` for another scheme.
    pub fn bearer(authorization: &str) -> Option<String> {
        let (scheme, token) = authorization.trim().split_once(' ')?;
        let token = token.trim();
        (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_string())
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a credential: say only whether there is one.
        let token = self.bearer_token.as_ref().map(|_| "<redacted>");
        f.debug_struct("Credentials")
            .field("bearer_token", &token)
            .field("peer_certificates", &self.peer_certificates.len())
            .finish()
    }
}

/// Why a stream could not be authenticated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthnError {
    #[error("no credentials presented ({0})")]
    Missing(&'static str),
    #[error("{authenticator}: {reason}")]
    Rejected {
        authenticator: &'static str,
        reason: String,
    },
}

/// Turns what a stream presents into who it is.
#[async_trait]
pub trait Authenticator: Send + Sync {
    /// A short name for logs and errors (`anonymous`, `kube-token-review`, …).
    fn name(&self) -> &'static str;

    async fn authenticate(&self, credentials: &Credentials) -> Result<Identity, AuthnError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_does_not_show_the_token() {
        let creds = Credentials {
            bearer_token: Some("eyJsecret".into()),
            peer_certificates: vec![Bytes::from_static(b"der")],
        };
        let debug = format!("{creds:?}");
        assert!(!debug.contains("eyJsecret"), "{debug}");
        assert!(
            debug.contains("<redacted>") && debug.contains("peer_certificates: 1"),
            "{debug}"
        );
    }

    #[test]
    fn only_a_bearer_authorization_gives_a_token() {
        assert_eq!(Credentials::bearer("Bearer abc"), Some("abc".into()));
        assert_eq!(Credentials::bearer("bearer  abc "), Some("abc".into()));
        assert_eq!(Credentials::bearer("Basic abc"), None);
        assert_eq!(Credentials::bearer("Bearer "), None);
        assert_eq!(Credentials::bearer("abc"), None);
    }
}
