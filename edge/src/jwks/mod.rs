//! The edge fetches the `jwksUri` of every RequestAuthentication in the snapshot, as
//! istiod's JWT key resolver does, so that Envoy gets the keys inline (`jwt_authn`'s
//! `local_jwks`) and needs no cluster toward the issuer.
//!
//! ```text
//!  snapshot watch ─► wanted URIs (bounded) ─► GET (timeout, size bound) ─► JwksStore
//!                                                    │ keys changed
//!                                                    ▼
//!                      push to the proxies (a full change of the RequestAuthentications
//!                      naming the URI: every sidecar, as for an edit of them)
//! ```
//!
//! Each URI is fetched when first named, then every refresh interval (Istio's 20
//! minutes). A failed fetch keeps the last good keys and is retried sooner; a URI never
//! fetched leaves its rules with keys that refuse every token (fail closed), logged
//! naming the RequestAuthentications. URIs no longer named are forgotten.

mod schedule;

use crate::authn::get_bounded;
use crate::xds::security::jwt::keys::JwksStore;
use futures::StreamExt;
use schedule::{Outcome, Schedule};
use shoal_proto::change::{ChangeKey, ChangeSet, TriggerReason};
use shoal_proto::config::validate::parse_duration;
use shoal_proto::config::validate::security::jwks_keys;
use shoal_proto::push_context::PushContext;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{error, info, warn};

/// Bounds and pace of the fetches (`--jwks-*` flags).
#[derive(Clone, Debug, PartialEq)]
pub struct JwksFetchConfig {
    /// Keys are refetched this often (Istio: 20 minutes).
    pub refresh_interval: Duration,
    /// A failed fetch is retried after this.
    pub retry_interval: Duration,
    /// Each fetch's timeout, unless its rule's `timeout` is set.
    pub timeout: Duration,
    /// The largest JWKS document read.
    pub max_bytes: usize,
    /// The most keys a document may hold.
    pub max_keys: usize,
    /// The most URIs fetched; the rules of others get keys that refuse every token.
    pub max_uris: usize,
    /// Fetches in flight at once.
    pub concurrency: usize,
}

impl Default for JwksFetchConfig {
    fn default() -> Self {
        JwksFetchConfig {
            refresh_interval: Duration::from_secs(20 * 60),
            retry_interval: Duration::from_secs(60),
            timeout: Duration::from_secs(5),
            max_bytes: shoal_proto::security::authn::jwt::MAX_JWKS_BYTES,
            max_keys: shoal_proto::security::authn::jwt::DEFAULT_MAX_JWKS_KEYS,
            max_uris: 256,
            concurrency: 8,
        }
    }
}

/// Keeps `store` filled with the keys of the snapshot's `jwksUri`s.
pub struct JwksRefresher {
    config: JwksFetchConfig,
    store: Arc<JwksStore>,
    snapshots: watch::Receiver<Arc<PushContext>>,
}

impl JwksRefresher {
    pub fn new(
        config: JwksFetchConfig,
        store: Arc<JwksStore>,
        snapshots: watch::Receiver<Arc<PushContext>>,
    ) -> Self {
        JwksRefresher {
            config,
            store,
            snapshots,
        }
    }

    /// Runs until `shutdown` or the snapshots end; `push` is called with the change
    /// to push whenever fetched keys change.
    pub async fn run(mut self, push: impl Fn(ChangeSet), shutdown: impl Future<Output = ()>) {
        let http = match reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::limited(3))
            .build()
        {
            Ok(http) => http,
            Err(e) => {
                error!(error = %e, "cannot build the JWKS HTTP client: jwksUri keys are never fetched, their tokens are refused");
                return;
            }
        };
        let mut schedule = Schedule::new(self.config.clone());
        let mut shutdown = std::pin::pin!(shutdown);
        let mut resync = true;
        loop {
            if std::mem::take(&mut resync) || self.snapshots.has_changed().unwrap_or(false) {
                let push_ctx = self.snapshots.borrow_and_update().clone();
                let over = schedule.want(wanted(&push_ctx), Instant::now());
                for (uri, policies) in over {
                    error!(jwks_uri = %uri, request_authentications = ?policies, max = self.config.max_uris,
                        "too many jwksUris: not fetched, tokens of these rules are refused (raise --jwks-max-uris)");
                }
                self.store.retain(&schedule.uris());
            }
            let due = schedule.due(Instant::now());
            if !due.is_empty() {
                let fetches = futures::stream::iter(due)
                    .map(|(uri, timeout)| {
                        let (http, config) = (&http, &self.config);
                        async move {
                            let r = fetch(http, &uri, timeout, config).await;
                            (uri, r)
                        }
                    })
                    .buffer_unordered(self.config.concurrency.max(1))
                    .collect::<Vec<_>>();
                let results = tokio::select! {
                    () = &mut shutdown => return,
                    results = fetches => results,
                };
                let changed = self.record(&mut schedule, results);
                if !changed.is_empty() {
                    push(ChangeSet::of(
                        true,
                        changed,
                        TriggerReason::ConfigUpdate,
                        SystemTime::now(),
                    ));
                }
                continue;
            }
            let next = schedule
                .next_due()
                .unwrap_or_else(|| Instant::now() + self.config.refresh_interval);
            tokio::select! {
                () = &mut shutdown => return,
                r = self.snapshots.changed() => {
                    if r.is_err() {
                        return;
                    }
                    resync = true;
                }
                () = tokio::time::sleep_until(next) => {}
            }
        }
    }

    /// Stores what the fetches brought and schedules the next ones; the
    /// RequestAuthentications whose keys changed.
    fn record(
        &self,
        schedule: &mut Schedule,
        results: Vec<(String, Result<Arc<str>, String>)>,
    ) -> BTreeSet<ChangeKey> {
        let mut changed = BTreeSet::new();
        for (uri, result) in results {
            let now = Instant::now();
            let reason = match result {
                Ok(doc) => {
                    schedule.done(&uri, Outcome::Fetched, now);
                    if self.store.set(&uri, doc) {
                        info!(jwks_uri = %uri, "JWKS keys changed; pushing");
                        changed.extend(schedule.policies(&uri).into_iter().map(ChangeKey::Config));
                    }
                    continue;
                }
                Err(reason) => reason,
            };
            schedule.done(&uri, Outcome::Failed, now);
            let policies: Vec<String> = (schedule.policies(&uri).iter())
                .map(|k| format!("{}/{}", k.namespace, k.name))
                .collect();
            if self.store.get(&uri).is_some() {
                warn!(jwks_uri = %uri, request_authentications = ?policies, %reason,
                    "refreshing JWKS failed; keeping the last good keys");
            } else {
                error!(jwks_uri = %uri, request_authentications = ?policies, %reason,
                    "fetching JWKS failed: tokens of these rules are refused until it succeeds");
            }
        }
        changed
    }
}

/// Every `jwksUri` the snapshot's RequestAuthentications name, with them and the
/// shortest `timeout` of their rules.
fn wanted(push: &PushContext) -> schedule::Wanted {
    let mut out = schedule::Wanted::new();
    for ra in push.index().security.all_request_authentications() {
        for rule in &ra.spec.jwt_rules {
            if !rule.jwks.is_empty() || rule.jwks_uri.is_empty() {
                continue;
            }
            let timeout = (rule.timeout.as_deref()).and_then(|t| parse_duration(t).ok());
            out.add(&rule.jwks_uri, &ra.namespace, &ra.name, timeout);
        }
    }
    out
}

/// GETs `uri` and checks the body is a JWKS Envoy can read, within the bounds.
async fn fetch(
    http: &reqwest::Client,
    uri: &str,
    timeout: Duration,
    config: &JwksFetchConfig,
) -> Result<Arc<str>, String> {
    let body = tokio::time::timeout(timeout, get_bounded(http, uri, config.max_bytes))
        .await
        .map_err(|_| format!("GET {uri}: no answer within {timeout:?}"))??;
    let text = String::from_utf8(body).map_err(|_| format!("{uri}: the JWKS is not UTF-8"))?;
    let keys = jwks_keys(&text).map_err(|e| format!("{uri}: not a JWKS: {e}"))?;
    if keys.is_empty() {
        return Err(format!("{uri}: the JWKS has no key"));
    }
    if keys.len() > config.max_keys {
        return Err(format!(
            "{uri}: the JWKS has {} keys, over the limit of {}",
            keys.len(),
            config.max_keys
        ));
    }
    Ok(Arc::from(text))
}

#[cfg(test)]
mod tests;
