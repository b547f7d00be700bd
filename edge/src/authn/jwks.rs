//! [`JwksAuthenticator`]: bearer tokens verified against the issuer's published keys, for
//! clusters where Shoal has no API access for TokenReview (istiod's JWT authenticator).
//!
//! The key set comes from the `jwks_uri` (given, or found by OIDC discovery at
//! `<issuer>/.well-known/openid-configuration`), or from a file for issuers Shoal cannot
//! reach. It is cached; refetched when older than the refresh interval, and when a token
//! names an unknown `kid` (a rotation), at most once per `min_refetch_interval` so that
//! tokens with made-up kids cannot make Shoal hammer the issuer. A file is re-read when
//! its modification time or length changes. A failed refresh keeps the last good keys.

use super::{rejected, unix_now};
use async_trait::async_trait;
use serde::Deserialize;
use shoal_proto::security::authn::jwt::{
    DEFAULT_MAX_JWKS_KEYS, JwkSet, JwtConfig, JwtError, JwtVerifier, MAX_JWKS_BYTES,
};
use shoal_proto::security::{Authenticator, AuthnError, Credentials, Identity, Principal};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::Mutex;

const NAME: &str = "jwt";

/// Where the issuer's keys are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JwksSource {
    /// OIDC discovery from the (first) configured issuer's URL.
    Discovery,
    /// This JWKS URL.
    Uri(String),
    /// A JWKS document in this file (`kubectl get --raw /openid/v1/jwks`).
    File(PathBuf),
}

/// Configuration of a [`JwksAuthenticator`].
#[derive(Clone, Debug)]
pub struct JwksConfig {
    pub jwt: JwtConfig,
    pub source: JwksSource,
    /// Keys older than this are refetched before use.
    pub refresh_interval: Duration,
    /// The least time between two fetches caused by unknown key ids.
    pub min_refetch_interval: Duration,
    /// Timeout of each HTTP request to the issuer.
    pub http_timeout: Duration,
    pub max_keys: usize,
    /// A PEM bundle trusted for the issuer's HTTPS, besides the system roots (the
    /// in-cluster API server's CA, `/var/run/secrets/kubernetes.io/serviceaccount/ca.crt`).
    pub ca_file: Option<PathBuf>,
}

impl JwksConfig {
    pub fn new(jwt: JwtConfig, source: JwksSource) -> Self {
        JwksConfig {
            jwt,
            source,
            refresh_interval: Duration::from_secs(20 * 60),
            min_refetch_interval: Duration::from_secs(10),
            http_timeout: Duration::from_secs(5),
            max_keys: DEFAULT_MAX_JWKS_KEYS,
            ca_file: None,
        }
    }
}

/// Why the authenticator could not be built.
#[derive(Debug, thiserror::Error)]
pub enum JwksConfigError {
    #[error("no JWT issuer is configured")]
    NoIssuer,
    #[error("reading the issuer CA bundle {path}: {source}")]
    CaFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the issuer CA bundle {path} is not PEM certificates: {source}")]
    CaPem {
        path: PathBuf,
        source: reqwest::Error,
    },
    #[error("building the HTTP client: {0}")]
    Client(reqwest::Error),
}

#[derive(Default)]
struct Cache {
    keys: Option<Arc<JwkSet>>,
    fetched_at: Option<Instant>,
    /// The last fetch made because of an unknown kid (the rate limit).
    last_kid_refetch: Option<Instant>,
    /// The discovered `jwks_uri`.
    jwks_uri: Option<String>,
    /// (modified, length) of the file when last read.
    file_stamp: Option<(SystemTime, u64)>,
}

/// Verifies bearer tokens against an issuer's JWKS; see the module docs.
pub struct JwksAuthenticator {
    verifier: JwtVerifier,
    config: JwksConfig,
    http: reqwest::Client,
    cache: Mutex<Cache>,
    fetches: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for JwksAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwksAuthenticator")
            .field("issuers", &self.config.jwt.issuers)
            .field("source", &self.config.source)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Discovery {
    issuer: String,
    jwks_uri: String,
}

impl JwksAuthenticator {
    /// Builds it; nothing is fetched until the first token (or [`Self::refresh`]).
    pub fn new(config: JwksConfig) -> Result<Self, JwksConfigError> {
        if config.jwt.issuers.is_empty() {
            return Err(JwksConfigError::NoIssuer);
        }
        let mut http = reqwest::Client::builder()
            .timeout(config.http_timeout)
            .redirect(reqwest::redirect::Policy::limited(3));
        if let Some(path) = &config.ca_file {
            let pem = std::fs::read(path).map_err(|source| JwksConfigError::CaFile {
                path: path.clone(),
                source,
            })?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| {
                JwksConfigError::CaPem {
                    path: path.clone(),
                    source,
                }
            })? {
                http = http.add_root_certificate(cert);
            }
        }
        Ok(JwksAuthenticator {
            verifier: JwtVerifier::new(config.jwt.clone()),
            http: http.build().map_err(JwksConfigError::Client)?,
            config,
            cache: Mutex::default(),
            fetches: Default::default(),
        })
    }

    /// How many times the key set was fetched or read (for tests and metrics).
    pub fn fetches(&self) -> usize {
        self.fetches.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Loads the keys now (at startup, so a misconfiguration is logged before any proxy).
    pub async fn refresh(&self) -> Result<Arc<JwkSet>, String> {
        let mut cache = self.cache.lock().await;
        self.load(&mut cache).await
    }

    /// The principal of `token`, or why not.
    pub async fn verify(&self, token: &str) -> Result<Principal, String> {
        let keys = self.current_keys().await?;
        match self.verifier.verify(token, &keys, unix_now()) {
            Err(JwtError::UnknownKeyId(kid)) => {
                let keys = self.refetch_for_kid(&kid).await?;
                self.verifier
                    .verify(token, &keys, unix_now())
                    .map_err(|e| e.to_string())
            }
            other => other.map_err(|e| e.to_string()),
        }
    }

    /// The cached keys, reloaded first when stale (or the file changed).
    async fn current_keys(&self) -> Result<Arc<JwkSet>, String> {
        let mut cache = self.cache.lock().await;
        let stale = match (&cache.keys, cache.fetched_at) {
            (Some(_), Some(at)) => match &self.config.source {
                JwksSource::File(path) => file_stamp(path).await != cache.file_stamp,
                _ => at.elapsed() >= self.config.refresh_interval,
            },
            _ => true,
        };
        if !stale && let Some(keys) = &cache.keys {
            return Ok(keys.clone());
        }
        match self.load(&mut cache).await {
            Ok(keys) => Ok(keys),
            // The last good keys serve while the issuer is away.
            Err(e) => match &cache.keys {
                Some(keys) => {
                    tracing::warn!(error = %e, "refreshing the JWT issuer's keys failed; keeping the last ones");
                    Ok(keys.clone())
                }
                None => Err(e),
            },
        }
    }

    /// Refetches for an unknown kid, unless one such refetch was made too recently.
    async fn refetch_for_kid(&self, kid: &str) -> Result<Arc<JwkSet>, String> {
        let mut cache = self.cache.lock().await;
        if let Some(keys) = &cache.keys
            && keys.has_key_id(kid)
        {
            // Another stream's refetch found it meanwhile.
            return Ok(keys.clone());
        }
        let recent = cache
            .last_kid_refetch
            .is_some_and(|at| at.elapsed() < self.config.min_refetch_interval);
        if recent {
            return Err(JwtError::UnknownKeyId(kid.to_string()).to_string());
        }
        cache.last_kid_refetch = Some(Instant::now());
        self.load(&mut cache).await
    }

    async fn load(&self, cache: &mut Cache) -> Result<Arc<JwkSet>, String> {
        self.fetches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (from, bytes, stamp) = match &self.config.source {
            JwksSource::File(path) => {
                let stamp = file_stamp(path).await;
                let bytes = tokio::fs::read(path)
                    .await
                    .map_err(|e| format!("reading the JWKS file {}: {e}", path.display()))?;
                (path.display().to_string(), bytes, stamp)
            }
            JwksSource::Uri(uri) => (uri.clone(), self.get(uri).await?, None),
            JwksSource::Discovery => {
                let uri = match &cache.jwks_uri {
                    Some(uri) => uri.clone(),
                    None => self.discover().await?,
                };
                cache.jwks_uri = Some(uri.clone());
                (uri.clone(), self.get(&uri).await?, None)
            }
        };
        let keys = JwkSet::from_json_bounded(&bytes, self.config.max_keys)
            .map_err(|e| format!("the JWKS of {from}: {e}"))?;
        for skipped in &keys.skipped {
            tracing::warn!(jwks = %from, "JWKS key skipped: {skipped}");
        }
        tracing::info!(jwks = %from, keys = keys.keys().len(), "JWT issuer keys loaded");
        let keys = Arc::new(keys);
        cache.keys = Some(keys.clone());
        cache.fetched_at = Some(Instant::now());
        cache.file_stamp = stamp;
        Ok(keys)
    }

    /// The `jwks_uri` of the issuer's OIDC discovery document, whose `issuer` must be it.
    async fn discover(&self) -> Result<String, String> {
        let issuer = &self.config.jwt.issuers[0];
        let url = format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        );
        let body = self.get(&url).await?;
        let doc: Discovery = serde_json::from_slice(&body).map_err(|e| {
            format!("the OIDC discovery document {url} has no issuer and jwks_uri: {e}")
        })?;
        if doc.issuer != *issuer {
            return Err(format!(
                "the OIDC discovery document {url} names issuer {:?}, not {issuer:?}",
                doc.issuer
            ));
        }
        Ok(doc.jwks_uri)
    }

    /// GETs `url`, refusing a body over [`MAX_JWKS_BYTES`].
    async fn get(&self, url: &str) -> Result<Vec<u8>, String> {
        get_bounded(&self.http, url, MAX_JWKS_BYTES).await
    }
}

/// GETs `url` (a success status), refusing a body over `max_bytes` as it streams in.
/// Also how the edge fetches RequestAuthentications' `jwksUri`s (`crate::jwks`).
pub(crate) async fn get_bounded(
    http: &reqwest::Client,
    url: &str,
    max_bytes: usize,
) -> Result<Vec<u8>, String> {
    let mut response = http
        .get(url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| format!("GET {url}: {e}"))?;
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("GET {url}: {e}"))?
    {
        if body.len() + chunk.len() > max_bytes {
            return Err(format!("GET {url}: the body is over {max_bytes} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

async fn file_stamp(path: &std::path::Path) -> Option<(SystemTime, u64)> {
    let meta = tokio::fs::metadata(path).await.ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

#[async_trait]
impl Authenticator for JwksAuthenticator {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn authenticate(&self, credentials: &Credentials) -> Result<Identity, AuthnError> {
        let token = credentials
            .bearer_token
            .as_deref()
            .ok_or(AuthnError::Missing("no bearer token"))?;
        let principal = self
            .verify(token)
            .await
            .map_err(|reason| rejected(NAME, reason))?;
        Ok(Identity::authenticated(principal))
    }
}

#[cfg(test)]
mod tests;
