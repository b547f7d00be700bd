//! [`TokenReviewAuthenticator`]: bearer tokens checked by the Kubernetes API server with a
//! TokenReview, as istiod's Kubernetes JWT authenticator does: `spec.audiences` the
//! wanted ones (`istio-ca`); refused unless `status.authenticated`, the user is a
//! service account (`system:serviceaccount:<ns>:<sa>`, in `system:serviceaccounts`), and
//! `status.audiences` names one of the wanted audiences (a server that returns none is
//! not audience-aware, and its answer says nothing about the audience).
//!
//! Answers are cached for a short, configurable time (and never past the token's own
//! `exp`), keyed by the token's hash, in a bounded map, so that a storm of reconnecting
//! proxies is not a storm of TokenReviews. Errors reaching the API server are not cached.

use super::{rejected, unix_now};
use async_trait::async_trait;
use base64::Engine;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use shoal_proto::security::authn::jwt::{DEFAULT_AUDIENCE, parse_subject};
use shoal_proto::security::{
    AuthMethod, Authenticator, AuthnError, Credentials, Identity, Principal,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

const NAME: &str = "kube-token-review";
const SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";

/// Configuration of a [`TokenReviewAuthenticator`].
#[derive(Clone, Debug)]
pub struct TokenReviewConfig {
    /// `spec.audiences`; the answer must name one of them.
    pub audiences: Vec<String>,
    /// The trust domain given to principals.
    pub trust_domain: String,
    /// How long an answer is reused (zero: never).
    pub cache_ttl: Duration,
    /// The most answers kept.
    pub cache_capacity: usize,
    /// The largest token sent for review.
    pub max_token_bytes: usize,
}

impl TokenReviewConfig {
    pub fn new(trust_domain: impl Into<String>) -> Self {
        TokenReviewConfig {
            audiences: vec![DEFAULT_AUDIENCE.to_string()],
            trust_domain: trust_domain.into(),
            cache_ttl: Duration::from_secs(30),
            cache_capacity: 10_000,
            max_token_bytes: shoal_proto::security::authn::jwt::DEFAULT_MAX_TOKEN_BYTES,
        }
    }
}

struct Cached {
    until: Instant,
    answer: Result<Principal, String>,
}

/// Authenticates bearer tokens with the API server's TokenReview.
pub struct TokenReviewAuthenticator {
    client: kube::Client,
    config: TokenReviewConfig,
    cache: Mutex<HashMap<[u8; 32], Cached>>,
    reviews: AtomicUsize,
}

impl std::fmt::Debug for TokenReviewAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenReviewAuthenticator")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl TokenReviewAuthenticator {
    /// `client` must be allowed to `create tokenreviews` (`system:auth-delegator`).
    pub fn new(client: kube::Client, config: TokenReviewConfig) -> Self {
        TokenReviewAuthenticator {
            client,
            config,
            cache: Mutex::default(),
            reviews: AtomicUsize::new(0),
        }
    }

    /// How many TokenReviews were posted (for tests and metrics).
    pub fn reviews(&self) -> usize {
        self.reviews.load(Ordering::Relaxed)
    }

    /// The principal of `token`, or why not.
    pub async fn review(&self, token: &str) -> Result<Principal, String> {
        if token.len() > self.config.max_token_bytes {
            return Err(format!(
                "the token is {} bytes, over the limit of {}",
                token.len(),
                self.config.max_token_bytes
            ));
        }
        let key = *blake3::hash(token.as_bytes()).as_bytes();
        if let Some(answer) = self.cached(&key) {
            return answer;
        }
        self.reviews.fetch_add(1, Ordering::Relaxed);
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: Some(self.config.audiences.clone()),
            },
            ..Default::default()
        };
        let answered = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| format!("the TokenReview could not be made: {e}"))?;
        let answer = self.judge(answered);
        self.remember(key, token, answer.clone());
        answer
    }

    /// What istiod concludes from the API server's answer.
    fn judge(&self, review: TokenReview) -> Result<Principal, String> {
        let status = review.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return Err(match status.error.filter(|e| !e.is_empty()) {
                Some(error) => format!("the API server did not authenticate the token: {error}"),
                None => "the API server did not authenticate the token".into(),
            });
        }
        let user = status.user.unwrap_or_default();
        let username = user.username.unwrap_or_default();
        let in_group = user
            .groups
            .unwrap_or_default()
            .iter()
            .any(|g| g == SERVICE_ACCOUNTS_GROUP);
        let (namespace, service_account) = parse_subject(&username)
            .filter(|_| in_group)
            .ok_or_else(|| {
                format!(
                    "the token's user {username:?} is not a service account (system:serviceaccount:<ns>:<sa> in {SERVICE_ACCOUNTS_GROUP})"
                )
            })?;
        let audiences = status.audiences.unwrap_or_default();
        if !audiences.iter().any(|a| self.config.audiences.contains(a)) {
            return Err(format!(
                "the API server's review names audiences {audiences:?}, none of the wanted {:?}",
                self.config.audiences
            ));
        }
        Ok(Principal {
            trust_domain: self.config.trust_domain.clone(),
            namespace: namespace.to_string(),
            service_account: service_account.to_string(),
            method: AuthMethod::Jwt,
        })
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Result<Principal, String>> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let hit = cache.get(key)?;
        (hit.until > Instant::now()).then(|| hit.answer.clone())
    }

    fn remember(&self, key: [u8; 32], token: &str, answer: Result<Principal, String>) {
        let mut ttl = self.config.cache_ttl;
        if let (Ok(_), Some(exp)) = (&answer, unverified_exp(token)) {
            // Never vouch for a token past its own expiry.
            let left = u64::try_from(exp.saturating_sub(unix_now())).unwrap_or(0);
            ttl = ttl.min(Duration::from_secs(left));
        }
        if ttl.is_zero() || self.config.cache_capacity == 0 {
            return;
        }
        let now = Instant::now();
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= self.config.cache_capacity {
            cache.retain(|_, c| c.until > now);
        }
        if cache.len() >= self.config.cache_capacity {
            // Still full of live answers: the one closest to expiry goes.
            if let Some(oldest) = cache.iter().min_by_key(|(_, c)| c.until).map(|(k, _)| *k) {
                cache.remove(&oldest);
            }
        }
        cache.insert(
            key,
            Cached {
                until: now + ttl,
                answer,
            },
        );
    }
}

/// The `exp` of a JWT's payload, read without verifying (the API server has): only to
/// bound how long its answer is cached.
fn unverified_exp(token: &str) -> Option<i64> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("exp")?.as_f64().map(|e| e as i64)
}

#[async_trait]
impl Authenticator for TokenReviewAuthenticator {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn authenticate(&self, credentials: &Credentials) -> Result<Identity, AuthnError> {
        let token = credentials
            .bearer_token
            .as_deref()
            .ok_or(AuthnError::Missing("no bearer token"))?;
        let principal = self
            .review(token)
            .await
            .map_err(|reason| rejected(NAME, reason))?;
        Ok(Identity::authenticated(principal))
    }
}

#[cfg(test)]
mod tests;
