//! [`JwksStore`]: the key sets the edge fetched for `jwksUri`s, read synchronously by
//! generation and written by the refresher (`crate::jwks`). A leaf: it knows neither.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// What Envoy gets for a `jwksUri` whose keys were never fetched (Istio's fake JWKS): a
/// well-formed set with one RSA key whose private half nobody holds, so every token is
/// refused (401) while a request without one still passes: the policy fails closed.
pub const UNFETCHED_JWKS: &str = r#"{"keys":[{"kty":"RSA","alg":"RS256","use":"sig","kid":"shoal-unfetched","e":"AQAB","n":"utc4qbiKCF53XUNDLFu84HaZLNCulKoD7HNEyBV2u81AKWwZ0jw7SUXHOw2rIdM0Pneq3YjRWvD__jStlKVqHml2lJBEwNTyL2yiLtb0GIhjCtX-iNXtEwwcyqc6CBuc-60yKL0dA1leOi5E8hE2GNb4wPZfFG3dc24GswhIqIlq-9f98BYvOCzr1qWJ56AcPkYPF66KI77Xtxj5dAM3PUKBlKcCnJgMeY2bNnVhwzztnO4eOMrGgJD2_BYvIhMMv7K4wRUH6hWqw0zttxI1CRuWK7pmzv3Vp7bJL7QgnbALkG_OGb0H7xeWXDc4JqC-DqyBKSjtMDezkf7GPbbb-w"}]}"#;

/// The last good JWKS document of each `jwksUri`, and a version that moves whenever one
/// changes (generation caches key on it).
#[derive(Debug, Default)]
pub struct JwksStore {
    docs: RwLock<HashMap<String, Arc<str>>>,
    version: AtomicU64,
}

impl JwksStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// The keys of `uri`, if ever fetched.
    pub fn get(&self, uri: &str) -> Option<Arc<str>> {
        self.docs
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(uri)
            .cloned()
    }

    /// Moves whenever a document is set to different keys or forgotten.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Stores `doc` as the keys of `uri`; true when they differ from the stored ones.
    pub fn set(&self, uri: &str, doc: Arc<str>) -> bool {
        let mut docs = self
            .docs
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if docs.get(uri).is_some_and(|old| **old == *doc) {
            return false;
        }
        docs.insert(uri.to_string(), doc);
        self.version.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// Forgets the URIs no RequestAuthentication names any more.
    pub fn retain(&self, wanted: &BTreeSet<String>) {
        let mut docs = self
            .docs
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = docs.len();
        docs.retain(|uri, _| wanted.contains(uri));
        if docs.len() != before {
            self.version.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// How many URIs hold keys.
    pub fn len(&self) -> usize {
        self.docs
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
