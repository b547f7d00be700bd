//! Bearer tokens for simulated proxies and CA callers, minted by the loadtest itself from
//! an ES256 key (the issuer whose JWKS the edge reads with `--jwks-file`), shaped like the
//! projected service-account tokens (audience `istio-ca`) pilot-agent sends. One token per
//! (namespace, service account), made before the clock starts, never one per proxy.

use shoal_test_support::jwt::TestIssuer;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use tonic::codegen::http::HeaderValue;

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("reading the JWT key {path}: {source}")]
    Key {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The issuer and the `authorization` values minted so far.
pub struct Tokens {
    issuer: TestIssuer,
    minted: Mutex<HashMap<(String, String), HeaderValue>>,
}

// Tokens are credentials: never printed.
impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("issuer", &self.issuer.issuer())
            .finish_non_exhaustive()
    }
}

impl Tokens {
    /// Tokens of issuer `iss` signed with the PKCS#8 PEM key in `key_file`.
    pub fn from_key_file(key_file: &Path, iss: &str) -> Result<Self, TokenError> {
        let key_error = |source| TokenError::Key {
            path: key_file.display().to_string(),
            source,
        };
        let pem = std::fs::read_to_string(key_file).map_err(key_error)?;
        let issuer = TestIssuer::from_pkcs8_pem(iss, &pem).map_err(key_error)?;
        Ok(Tokens::new(issuer))
    }

    pub fn new(issuer: TestIssuer) -> Self {
        Tokens {
            issuer,
            minted: Mutex::new(HashMap::new()),
        }
    }

    /// `Bearer <token>` for `namespace/service_account`, minted on first use.
    pub fn authorization(&self, namespace: &str, service_account: &str) -> HeaderValue {
        let mut minted = self.minted.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (namespace.to_string(), service_account.to_string());
        minted
            .entry(key)
            .or_insert_with(|| {
                let token = self.issuer.istio_token(namespace, service_account);
                let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                    .expect("a JWT is a valid header value");
                value.set_sensitive(true);
                value
            })
            .clone()
    }

    /// How many distinct tokens were minted.
    pub fn minted(&self) -> usize {
        self.minted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_token_per_identity() {
        let tokens = Tokens::new(TestIssuer::new("https://iss"));
        let a = tokens.authorization("ns-0", "default");
        assert_eq!(tokens.authorization("ns-0", "default"), a);
        assert_ne!(tokens.authorization("ns-1", "default"), a);
        assert_eq!(tokens.minted(), 2);
        assert!(a.to_str().unwrap().starts_with("Bearer ey"));
        assert!(!format!("{tokens:?}").contains("ey"), "no token in Debug");
    }
}
