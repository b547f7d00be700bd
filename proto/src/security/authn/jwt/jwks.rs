//! [`JwkSet`]: an issuer's public keys (RFC 7517), as its `jwks_uri` serves them, parsed
//! once and bounded; the keys Shoal cannot use are listed with the reason, not dropped
//! silently.

use super::error::JwtError;
use super::jws::Jws;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde::Deserialize;

/// The most keys a set may hold, unless configured otherwise: issuers publish a handful
/// (current and next); a set of thousands is an attack on the per-token search.
pub const DEFAULT_MAX_JWKS_KEYS: usize = 64;
/// The largest JWKS document read: 64 keys of 4096-bit RSA are well under this.
pub const MAX_JWKS_BYTES: usize = 512 * 1024;

/// The signature algorithms accepted: what Kubernetes (RS256, ES256) and common OIDC
/// issuers sign service-account tokens with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    Rs256,
    Es256,
}

impl Algorithm {
    pub fn from_name(name: &str) -> Option<Algorithm> {
        match name {
            "RS256" => Some(Algorithm::Rs256),
            "ES256" => Some(Algorithm::Es256),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Rs256 => "RS256",
            Algorithm::Es256 => "ES256",
        }
    }
}

/// A public key's material, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
enum KeyMaterial {
    /// Big-endian modulus and exponent.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// The uncompressed P-256 point `04 || x || y`.
    EcP256 { point: Vec<u8> },
}

/// One usable public key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Jwk {
    pub key_id: Option<String>,
    pub algorithm: Algorithm,
    material: KeyMaterial,
}

/// An issuer's usable keys, and why any others were skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JwkSet {
    keys: Vec<Jwk>,
    /// One line per key that was not usable (`key 2 (kid "x"): ...`).
    pub skipped: Vec<String>,
}

/// Why a JWKS document could not be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    #[error("the JWKS is {len} bytes, over the limit of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("the JWKS is not a JSON object with a \"keys\" array: {0}")]
    Malformed(String),
    #[error("the JWKS has {count} keys, over the limit of {max}")]
    TooManyKeys { count: usize, max: usize },
    #[error("the JWKS has no usable RS256 or ES256 key ({})", skipped.join("; "))]
    NoUsableKey { skipped: Vec<String> },
}

#[derive(Deserialize)]
struct RawSet {
    keys: Vec<RawKey>,
}

#[derive(Deserialize)]
struct RawKey {
    kty: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    alg: Option<String>,
    #[serde(default, rename = "use")]
    use_: Option<String>,
    #[serde(default)]
    crv: Option<String>,
    #[serde(default)]
    n: Option<String>,
    #[serde(default)]
    e: Option<String>,
    #[serde(default)]
    x: Option<String>,
    #[serde(default)]
    y: Option<String>,
}

impl JwkSet {
    /// Parses a JWKS document with the default bounds.
    pub fn from_json(json: &[u8]) -> Result<JwkSet, JwksError> {
        Self::from_json_bounded(json, DEFAULT_MAX_JWKS_KEYS)
    }

    /// Parses a JWKS document of at most `max_keys` keys; fails if none is usable.
    pub fn from_json_bounded(json: &[u8], max_keys: usize) -> Result<JwkSet, JwksError> {
        if json.len() > MAX_JWKS_BYTES {
            return Err(JwksError::TooLarge {
                len: json.len(),
                max: MAX_JWKS_BYTES,
            });
        }
        let raw: RawSet =
            serde_json::from_slice(json).map_err(|e| JwksError::Malformed(e.to_string()))?;
        if raw.keys.len() > max_keys {
            return Err(JwksError::TooManyKeys {
                count: raw.keys.len(),
                max: max_keys,
            });
        }
        let mut set = JwkSet::default();
        for (index, key) in raw.keys.into_iter().enumerate() {
            let kid = key.kid.clone();
            match Jwk::from_raw(key) {
                Ok(jwk) => set.keys.push(jwk),
                Err(reason) => set
                    .skipped
                    .push(format!("key {index} (kid {kid:?}): {reason}")),
            }
        }
        if set.keys.is_empty() {
            return Err(JwksError::NoUsableKey {
                skipped: set.skipped,
            });
        }
        Ok(set)
    }

    pub fn keys(&self) -> &[Jwk] {
        &self.keys
    }

    /// Whether a key has this id.
    pub fn has_key_id(&self, kid: &str) -> bool {
        self.keys.iter().any(|k| k.key_id.as_deref() == Some(kid))
    }

    /// Checks the signature of `jws`: with the key of its `kid`, or, without one, with
    /// each key of its algorithm.
    pub fn verify(&self, jws: &Jws) -> Result<(), JwtError> {
        let message = jws.signing_input.as_bytes();
        if let Some(kid) = &jws.key_id {
            let key = self
                .keys
                .iter()
                .find(|k| k.key_id.as_deref() == Some(kid.as_str()))
                .ok_or_else(|| JwtError::UnknownKeyId(kid.clone()))?;
            if key.algorithm != jws.algorithm {
                // A key is used only with its own algorithm (RFC 8725 §3.1).
                return Err(JwtError::BadSignature);
            }
            return key.verify(message, &jws.signature);
        }
        let mut candidates = self
            .keys
            .iter()
            .filter(|k| k.algorithm == jws.algorithm)
            .peekable();
        if candidates.peek().is_none() {
            return Err(JwtError::NoKeyForAlgorithm(jws.algorithm.name()));
        }
        if candidates.any(|k| k.verify(message, &jws.signature).is_ok()) {
            Ok(())
        } else {
            Err(JwtError::BadSignature)
        }
    }
}

impl Jwk {
    fn from_raw(raw: RawKey) -> Result<Jwk, String> {
        if let Some(use_) = &raw.use_
            && use_ != "sig"
        {
            return Err(format!("its use is {use_:?}, not \"sig\""));
        }
        let field = |value: &Option<String>, name: &str| -> Result<Vec<u8>, String> {
            let value = value.as_ref().ok_or(format!("it has no {name:?}"))?;
            URL_SAFE_NO_PAD
                .decode(value)
                .map_err(|_| format!("its {name:?} is not base64url"))
        };
        let (algorithm, material) = match raw.kty.as_str() {
            "RSA" => {
                let n = strip_zeros(field(&raw.n, "n")?);
                let e = strip_zeros(field(&raw.e, "e")?);
                if n.len() < 256 {
                    return Err(format!(
                        "its RSA modulus is {} bits, under 2048",
                        n.len() * 8
                    ));
                }
                (Algorithm::Rs256, KeyMaterial::Rsa { n, e })
            }
            "EC" => {
                if raw.crv.as_deref() != Some("P-256") {
                    return Err(format!("its curve {:?} is not P-256", raw.crv));
                }
                let (x, y) = (field(&raw.x, "x")?, field(&raw.y, "y")?);
                if x.len() != 32 || y.len() != 32 {
                    return Err("its P-256 coordinates are not 32 bytes each".into());
                }
                let mut point = Vec::with_capacity(65);
                point.push(4);
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                (Algorithm::Es256, KeyMaterial::EcP256 { point })
            }
            other => return Err(format!("its key type {other:?} is not RSA or EC")),
        };
        if let Some(alg) = &raw.alg
            && Algorithm::from_name(alg) != Some(algorithm)
        {
            return Err(format!(
                "its alg {alg:?} is not {} for a {} key",
                algorithm.name(),
                raw.kty
            ));
        }
        Ok(Jwk {
            key_id: raw.kid,
            algorithm,
            material,
        })
    }

    fn verify(&self, message: &[u8], sig: &[u8]) -> Result<(), JwtError> {
        let ok = match &self.material {
            KeyMaterial::Rsa { n, e } => RsaPublicKeyComponents { n, e }
                .verify(&signature::RSA_PKCS1_2048_8192_SHA256, message, sig)
                .is_ok(),
            KeyMaterial::EcP256 { point } => {
                UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                    .verify(message, sig)
                    .is_ok()
            }
        };
        ok.then_some(()).ok_or(JwtError::BadSignature)
    }
}

/// Big-endian integers may come with leading zero bytes; ring wants them without.
fn strip_zeros(mut bytes: Vec<u8>) -> Vec<u8> {
    let zeros = bytes.iter().take_while(|b| **b == 0).count();
    bytes.drain(..zeros);
    bytes
}
