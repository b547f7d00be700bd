//! Compact JWS (`header.payload.signature`, RFC 7515 §7.1) split and decoded, bounded,
//! before any key is looked at.

use super::error::JwtError;
use super::jwks::Algorithm;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use std::fmt;

/// The largest token accepted, unless configured otherwise: a Kubernetes projected token
/// is about 1 KiB; 16 KiB leaves room for large claim sets and bounds the work per stream.
pub const DEFAULT_MAX_TOKEN_BYTES: usize = 16 * 1024;

/// A compact JWS, decoded but not verified. Its `Debug` shows the header only: the token
/// is a credential and must not reach a log.
pub struct Jws {
    pub algorithm: Algorithm,
    pub key_id: Option<String>,
    /// `header.payload` as sent: what the signature covers.
    pub(crate) signing_input: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) signature: Vec<u8>,
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    crit: Option<serde_json::Value>,
}

impl Jws {
    /// Splits and decodes `token`; refuses tokens over `max_bytes`, other than three
    /// base64url parts, or with an algorithm other than RS256 and ES256 (`none` included).
    pub fn parse(token: &str, max_bytes: usize) -> Result<Jws, JwtError> {
        if token.len() > max_bytes {
            return Err(JwtError::TooLarge {
                len: token.len(),
                max: max_bytes,
            });
        }
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwtError::Malformed(
                "it does not have three dot-separated parts",
            ));
        };
        let decode = |part: &str, what| {
            URL_SAFE_NO_PAD
                .decode(part)
                .map_err(|_| JwtError::Malformed(what))
        };
        let header_bytes = decode(header, "its header is not base64url")?;
        let header: Header = serde_json::from_slice(&header_bytes)
            .map_err(|_| JwtError::Malformed("its header is not a JSON object with \"alg\""))?;
        if header.crit.is_some() {
            // RFC 7515 §4.1.11: extensions we do not understand must not be ignored.
            return Err(JwtError::Malformed(
                "its header has \"crit\" extensions, which are not supported",
            ));
        }
        let algorithm = Algorithm::from_name(&header.alg)
            .ok_or_else(|| JwtError::UnsupportedAlgorithm(header.alg.clone()))?;
        Ok(Jws {
            algorithm,
            key_id: header.kid,
            signing_input: token[..header_len(token)].to_string(),
            payload: decode(payload, "its payload is not base64url")?,
            signature: decode(signature, "its signature is not base64url")?,
        })
    }
}

/// The length of `header.payload` in a token already known to have three parts.
fn header_len(token: &str) -> usize {
    token.rfind('.').unwrap_or(token.len())
}

impl fmt::Debug for Jws {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Jws")
            .field("algorithm", &self.algorithm)
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}
