//! The authenticators that need I/O, over the pure ones of `shoal_proto::security::authn`.
//!
//! ```text
//!  JwksAuthenticator ── jwks::KeySource (OIDC discovery | jwks_uri | file) ─► JwkSet (cached)
//!                    └─ jwt::JwtVerifier (pure) ─► Principal
//!  TokenReviewAuthenticator ── kube::Client ─► POST TokenReview (audiences istio-ca) ─► Principal
//!                            └─ bounded cache of results, keyed by the token's hash
//! ```
//!
//! Put together as istiod does, client certificate first:
//! `Chain::new(vec![ClientCertificate, JwksAuthenticator | TokenReviewAuthenticator])`.

mod jwks;
mod token_review;

pub(crate) use jwks::get_bounded;
pub use jwks::{JwksAuthenticator, JwksConfig, JwksConfigError, JwksSource};
pub use token_review::{TokenReviewAuthenticator, TokenReviewConfig};

use shoal_proto::security::AuthnError;

/// A refusal by `authenticator`.
fn rejected(authenticator: &'static str, reason: impl Into<String>) -> AuthnError {
    AuthnError::Rejected {
        authenticator,
        reason: reason.into(),
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests;
