//! [`JwtError`]: why a token was refused. Each reason is its own variant with a message
//! that names what was wrong (the claim, the wanted value) and never the token itself.

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    #[error("the token is {len} bytes, over the limit of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("the token is not a compact JWS: {0}")]
    Malformed(&'static str),
    #[error("the token's algorithm {0:?} is not accepted (RS256 or ES256)")]
    UnsupportedAlgorithm(String),
    #[error("the token's key id {0:?} is not in the issuer's key set")]
    UnknownKeyId(String),
    #[error("the issuer's key set has no {0} key to check a token without a key id")]
    NoKeyForAlgorithm(&'static str),
    #[error("the token's signature does not verify against the issuer's keys")]
    BadSignature,
    #[error("the token has no {0:?} claim")]
    MissingClaim(&'static str),
    #[error("the token expired at {exp} (now {now}, skew {skew_s}s)")]
    Expired { exp: i64, now: i64, skew_s: u64 },
    #[error("the token is not valid before {nbf} (now {now}, skew {skew_s}s)")]
    NotYetValid { nbf: i64, now: i64, skew_s: u64 },
    #[error("the token's issuer {issuer:?} is not one of the configured issuers {allowed:?}")]
    UnknownIssuer {
        issuer: String,
        allowed: Vec<String>,
    },
    #[error("the token's audiences {got:?} include none of the wanted audiences {wanted:?}")]
    WrongAudience {
        got: Vec<String>,
        wanted: Vec<String>,
    },
    #[error("not a Kubernetes service-account token: {0}")]
    NotServiceAccount(String),
}
