//! JWT authentication without I/O: a compact JWS checked against an issuer's key set
//! ([`JwkSet`]), then its claims against the configuration, then mapped to the service
//! account it names. What fetches and refreshes the key set lives in the edge.
//!
//! ```text
//!  token ─► Jws::parse (≤16 KiB, RS256|ES256) ─► JwkSet::verify (kid, or each key of alg)
//!        ─► Claims: exp/nbf ± skew, iss ∈ issuers, aud ∩ audiences ≠ ∅
//!        ─► kubernetes.io {namespace, serviceaccount.name} | sub system:serviceaccount:ns:sa
//!        ─► Principal { trust_domain from config, method: Jwt }
//! ```
//!
//! As istiod's JWT authenticator: the audience wanted by default is `istio-ca`, which
//! pilot-agent asks its projected token for.

mod claims;
mod error;
mod jwks;
mod jws;
#[cfg(test)]
mod tests;

pub use claims::{Audiences, Claims, KubernetesClaims, NamedObject, parse_subject};
pub use error::JwtError;
pub use jwks::{Algorithm, DEFAULT_MAX_JWKS_KEYS, Jwk, JwkSet, JwksError, MAX_JWKS_BYTES};
pub use jws::{DEFAULT_MAX_TOKEN_BYTES, Jws};

use crate::security::identity::{AuthMethod, Principal};
use std::time::Duration;

/// The audience pilot-agent's token is requested for, and istiod's default.
pub const DEFAULT_AUDIENCE: &str = "istio-ca";
/// Clock skew tolerated on `exp` and `nbf`.
pub const DEFAULT_SKEW: Duration = Duration::from_secs(30);

/// What a token must satisfy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JwtConfig {
    /// Accepted `iss` values; at least one.
    pub issuers: Vec<String>,
    /// The token's `aud` must contain one of these.
    pub audiences: Vec<String>,
    /// The trust domain given to the principal (tokens do not carry one).
    pub trust_domain: String,
    pub skew: Duration,
    pub max_token_bytes: usize,
}

impl JwtConfig {
    /// One issuer, the `istio-ca` audience, default skew and bounds.
    pub fn new(issuer: impl Into<String>, trust_domain: impl Into<String>) -> Self {
        JwtConfig {
            issuers: vec![issuer.into()],
            audiences: vec![DEFAULT_AUDIENCE.to_string()],
            trust_domain: trust_domain.into(),
            skew: DEFAULT_SKEW,
            max_token_bytes: DEFAULT_MAX_TOKEN_BYTES,
        }
    }
}

/// Checks tokens; pure: the key set and the time are given.
#[derive(Clone, Debug)]
pub struct JwtVerifier {
    config: JwtConfig,
}

impl JwtVerifier {
    pub fn new(config: JwtConfig) -> Self {
        JwtVerifier { config }
    }

    pub fn config(&self) -> &JwtConfig {
        &self.config
    }

    /// The principal `token` proves at `now` (Unix seconds), or why it proves none.
    pub fn verify(&self, token: &str, keys: &JwkSet, now: i64) -> Result<Principal, JwtError> {
        let claims = decode_verified(token, keys, self.config.max_token_bytes)?;
        check_times(&claims, now, self.config.skew)?;
        let issuer = claims.iss.as_deref().ok_or(JwtError::MissingClaim("iss"))?;
        if !self.config.issuers.iter().any(|i| i == issuer) {
            return Err(JwtError::UnknownIssuer {
                issuer: issuer.to_string(),
                allowed: self.config.issuers.clone(),
            });
        }
        if !claims
            .aud
            .0
            .iter()
            .any(|a| self.config.audiences.contains(a))
        {
            return Err(JwtError::WrongAudience {
                got: claims.aud.0.clone(),
                wanted: self.config.audiences.clone(),
            });
        }
        let (namespace, service_account) = claims.service_account()?;
        Ok(Principal {
            trust_domain: self.config.trust_domain.clone(),
            namespace,
            service_account,
            method: AuthMethod::Jwt,
        })
    }
}

/// The claims of `token` once its signature verifies against `keys`; nothing else checked.
pub fn decode_verified(token: &str, keys: &JwkSet, max_bytes: usize) -> Result<Claims, JwtError> {
    let jws = Jws::parse(token, max_bytes)?;
    keys.verify(&jws)?;
    serde_json::from_slice(&jws.payload)
        .map_err(|_| JwtError::Malformed("its payload is not a JSON claims object"))
}

/// `exp` (required: a token that never expires is refused) and `nbf`, each with `skew`.
pub fn check_times(claims: &Claims, now: i64, skew: Duration) -> Result<(), JwtError> {
    let skew_s = skew.as_secs();
    let skew_i = i64::try_from(skew_s).unwrap_or(i64::MAX);
    let exp = claims.exp.ok_or(JwtError::MissingClaim("exp"))?;
    if now.saturating_sub(skew_i) >= exp {
        return Err(JwtError::Expired { exp, now, skew_s });
    }
    if let Some(nbf) = claims.nbf
        && now.saturating_add(skew_i) < nbf
    {
        return Err(JwtError::NotYetValid { nbf, now, skew_s });
    }
    Ok(())
}
