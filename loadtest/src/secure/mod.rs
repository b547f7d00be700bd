//! Connecting as Istio's agent does: TLS to the secure port, verified against the mesh
//! root under istiod's name ([`dial`]), each stream carrying a bearer token for its
//! proxy's own namespace and service account ([`tokens`]), minted from a key `loadtest
//! keys` wrote ([`keys`]).

pub mod dial;
pub mod keys;
pub mod tokens;

pub use dial::{DEFAULT_SERVER_NAME, DEFAULT_WRITE_COALESCE_BYTES, Dial, DialError, TlsDial};
pub use tokens::{TokenError, Tokens};

use std::path::PathBuf;
use std::sync::Arc;
use tonic::codegen::http::HeaderValue;

/// The service account of every simulated proxy (pods without one run as `default`).
pub const SERVICE_ACCOUNT: &str = "default";

/// Where the TLS trust and the token key come from (the `--tls-*` and `--jwt-*` flags).
#[derive(Clone, Debug, Default)]
pub struct SecurityConfig {
    /// The mesh root (PEM); TLS when given.
    pub tls_ca: Option<PathBuf>,
    /// The name verified on the edge's certificate (and sent as SNI).
    pub tls_server_name: Option<String>,
    /// The ES256 key (PKCS#8 PEM) tokens are signed with; tokens when given.
    pub jwt_key: Option<PathBuf>,
    /// The tokens' `iss`.
    pub jwt_issuer: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error(transparent)]
    Dial(#[from] DialError),
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error("--jwt-key needs --jwt-issuer (the iss the edge's --jwt-issuer names)")]
    NoIssuer,
}

/// How every connection and stream of a run is made.
#[derive(Clone, Debug, Default)]
pub struct Security {
    pub dial: Dial,
    pub tokens: Option<Arc<Tokens>>,
}

impl Security {
    pub fn load(config: &SecurityConfig) -> Result<Self, SecurityError> {
        let dial = match &config.tls_ca {
            Some(ca) => {
                let name = config
                    .tls_server_name
                    .as_deref()
                    .unwrap_or(DEFAULT_SERVER_NAME);
                Dial::tls(TlsDial::new(ca, name)?)
            }
            None => Dial::plain(),
        };
        let tokens = match (&config.jwt_key, &config.jwt_issuer) {
            (Some(key), Some(iss)) => Some(Arc::new(Tokens::from_key_file(key, iss)?)),
            (Some(_), None) => return Err(SecurityError::NoIssuer),
            (None, _) => None,
        };
        Ok(Security { dial, tokens })
    }

    /// Connections' writes gathered up to `bytes` (0: written as they come).
    pub fn with_write_coalescing(mut self, bytes: usize) -> Self {
        self.dial.write_coalesce_bytes = bytes;
        self
    }

    /// The `authorization` value for a stream of `namespace/service_account`, if any.
    pub fn authorization(&self, namespace: &str, service_account: &str) -> Option<HeaderValue> {
        self.tokens
            .as_ref()
            .map(|t| t.authorization(namespace, service_account))
    }

    /// Whether streams are plaintext and anonymous.
    pub fn is_plain(&self) -> bool {
        !self.dial.is_tls() && self.tokens.is_none()
    }
}
