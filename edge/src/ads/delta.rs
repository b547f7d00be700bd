//! One incremental (Delta) ADS stream, without I/O.
//!
//! Per type URL it keeps the subscription (wildcard and/or names, interned like SotW's)
//! and what the proxy holds ([`known::Known`]: the shared resources this stream sent, whose
//! version is their content hash, and after a reconnect the versions the proxy claimed in
//! `initial_resource_versions`). So a reconnect to any edge resends only what changed. A
//! response carries the resources whose version differs and the names that went away
//! (`removed_resources`).
//!
//! Subscription changes are deltas, so they are applied whatever the nonce (a stale
//! request's subscriptions would otherwise be lost); the nonce only decides ACK/NACK
//! bookkeeping. As the xDS protocol requires:
//!
//! - every name in `resource_names_subscribe` is answered, even one the stream believes
//!   the proxy holds at its current version (Envoy re-subscribes a name it dropped, then
//!   waits for it); names that do not exist are reported in `removed_resources`, so the
//!   proxy stops waiting for them;
//! - a name unsubscribed while `*` stays subscribed is answered too: resent if the
//!   wildcard covers it, else in `removed_resources` (the proxy cannot tell which, and
//!   drops it unless told);
//! - `*` is implied (legacy wildcard) only for CDS/LDS whose first request names nothing.
//!
//! A version is a resource's content hash and the snapshot it was sent from
//! (`known::version_of`): a reconnecting proxy's `initial_resource_versions` thus tell the
//! edge the newest snapshot the proxy has seen, and the stream task waits (up to
//! `--resume-wait`) for it, as a SotW proxy's `version_info` makes it do.
//!
//! Types this server does not generate are ignored without keeping anything, and the
//! names a stream subscribes to are bounded (`limits`).
//!
//! The first request of a type is always answered, empty if need be: Envoy completes a
//! wildcard subscription's initial fetch on an empty response (its `WatchMap` notifies
//! wildcard watches of an empty update). Not so a reconnect, whose request names the
//! versions the proxy holds: it had a response of the type before, so it is answered only
//! if something differs, and one holding every current version is sent nothing.

use super::by_type::ByType;
use super::error::{AdsError, Result};
use super::limits::{self, DEFAULT_MAX_NAMES};
use super::scope::{PushScope, host_selected};
use super::sent::Names;
use super::source::{ResourceSource, subscribed};
use super::status::{self, Nonces, Reply, RequestKind, Statuses, TypeStatus};
use super::transport::{DeltaResource, DeltaResponse as DeltaDiscoveryResponse};
use crate::proxy::Proxy;
use crate::xds::types::{CLUSTER, ENDPOINT, is_wildcard};
use crate::xds::{GenerateError, XdsResource};
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use known::Known;
pub(crate) use known::{claimed_snapshot, version_of};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

mod known;

/// The Delta state of one ADS stream.
#[derive(Debug)]
pub struct DeltaStream {
    proxy: Arc<Proxy>,
    watches: ByType<Watch>,
    nonces: Nonces,
    /// Names the stream may subscribe to, over all types.
    max_names: usize,
}

#[derive(Debug)]
struct Watch {
    wildcard: bool,
    /// What the proxy holds.
    known: Known,
    status: Arc<TypeStatus>,
}

/// What a request's subscription deltas ask the response to carry.
struct Asked {
    /// Names to answer, sorted and unique: each one subscribed, and each explicitly
    /// subscribed one unsubscribed while `*` stays.
    answer: Vec<String>,
    /// `*` was newly subscribed.
    wildcard_added: bool,
}

impl Watch {
    /// Applies a request's subscription deltas, unless the stream would then hold more
    /// than `max` names (`others` of them subscribed for other types).
    fn subscribe(
        &mut self,
        req: &DeltaDiscoveryRequest,
        others: usize,
        max: usize,
    ) -> Result<Asked> {
        let mut wildcard = self.wildcard;
        let mut wildcard_added = false;
        for name in &req.resource_names_subscribe {
            if name == "*" {
                wildcard_added |= !wildcard;
                wildcard = true;
            }
        }
        let mut wildcard_dropped = false;
        let mut gone: Vec<&str> = Vec::new();
        for name in &req.resource_names_unsubscribe {
            if name == "*" {
                wildcard_dropped |= wildcard;
                wildcard = false;
            } else {
                gone.push(name);
            }
        }
        gone.sort_unstable();
        gone.dedup();
        let unsubscribed = |n: &str| gone.binary_search(&n).is_ok();
        let mut answer: Vec<String> = req
            .resource_names_subscribe
            .iter()
            .filter(|n| *n != "*" && !unsubscribed(n))
            .cloned()
            .collect();
        answer.sort_unstable();
        answer.dedup();
        let added = answer
            .iter()
            .filter(|n| !self.status.names.contains(n))
            .count();
        // Phantom unsubscriptions (names not subscribed) are ignored, as the protocol asks.
        let dropped: Vec<&str> = gone
            .iter()
            .copied()
            .filter(|n| self.status.names.contains(n))
            .collect();
        let total = others + self.status.names.len() + added - dropped.len();
        limits::check_names(total, max, &req.type_url)?;

        self.wildcard = wildcard;
        if added > 0 || !dropped.is_empty() {
            // Interned again only when the subscription changes.
            let kept = self
                .status
                .names
                .iter()
                .map(String::as_str)
                .filter(|n| !unsubscribed(n));
            let new = answer
                .iter()
                .map(String::as_str)
                .filter(|n| !self.status.names.contains(n));
            Arc::make_mut(&mut self.status).names = Names::new(kept.chain(new));
        }
        if self.wildcard {
            // The wildcard may cover what was unsubscribed: the response says.
            answer.extend(dropped.iter().map(|n| n.to_string()));
            answer.sort_unstable();
        } else if wildcard_dropped || !gone.is_empty() {
            // Without `*`, the proxy holds only what it names: forget the rest.
            let names = &self.status.names;
            self.known.retain(|n| names.contains(n));
        }
        Ok(Asked {
            answer,
            wildcard_added,
        })
    }
}

/// Which resources a response considers.
enum Consider<'a> {
    /// The first response of the type: everything subscribed, against the versions the
    /// proxy claims to hold (`initial_resource_versions`; none: always answered).
    First(&'a HashMap<String, String>),
    /// Everything subscribed (of these hosts' clusters, when given).
    Subscribed(Option<&'a BTreeSet<String>>),
    /// Just these names (those a request asked to be answered).
    Names(&'a [String]),
}

impl DeltaStream {
    pub fn new(proxy: impl Into<Arc<Proxy>>) -> Self {
        DeltaStream {
            proxy: proxy.into(),
            watches: ByType::default(),
            nonces: Nonces::default(),
            max_names: DEFAULT_MAX_NAMES,
        }
    }

    /// Bounds the names the stream may subscribe to, over all types.
    pub fn with_max_names(mut self, max: usize) -> Self {
        self.max_names = max;
        self
    }

    pub fn proxy(&self) -> &Proxy {
        &self.proxy
    }

    /// Handles one request from the proxy.
    pub fn on_request(
        &mut self,
        src: &dyn ResourceSource,
        req: &DeltaDiscoveryRequest,
    ) -> Result<Reply<DeltaDiscoveryResponse>> {
        let type_url = req.type_url.as_str();
        if type_url.is_empty() {
            return Err(AdsError::MissingTypeUrl);
        }
        let Some(type_url) = limits::served(type_url) else {
            return Ok(Reply::new(RequestKind::Unsupported));
        };
        let others: usize = self
            .watches
            .iter()
            .filter(|(t, _)| *t != type_url)
            .map(|(_, w)| w.status.names.len())
            .sum();
        let first = !self.watches.contains_key(type_url);
        let w = self.watches.get_or_insert_with(type_url, || Watch {
            // Legacy wildcard: CDS/LDS whose first request names nothing.
            wildcard: is_wildcard(type_url)
                && req.resource_names_subscribe.is_empty()
                && req.resource_names_unsubscribe.is_empty(),
            known: Known::default(),
            status: Arc::new(TypeStatus::new(type_url)),
        });

        let nonce = req.response_nonce.as_str();
        let kind = if first {
            RequestKind::Initial
        } else if nonce.is_empty() {
            RequestKind::Subscribe
        } else if nonce != w.status.nonce_sent {
            RequestKind::Stale
        } else if let Some(err) = &req.error_detail {
            RequestKind::Nack(Arc::make_mut(&mut w.status).nacked(nonce, &err.message))
        } else {
            let version = w.status.version_sent.clone();
            Arc::make_mut(&mut w.status).acked(nonce, &version, w.known.sent());
            RequestKind::Ack
        };

        let asked = match w.subscribe(req, others, self.max_names) {
            Ok(asked) => asked,
            Err(e) => {
                if first {
                    self.watches.remove(type_url);
                }
                return Err(e);
            }
        };
        let answer = &asked.answer;

        let mut reply = Reply::new(kind);
        let claimed = &req.initial_resource_versions;
        let response = if first {
            let response = self.respond(src, type_url, Consider::First(claimed), answer);
            if response.is_err()
                && let Some(w) = self.watches.get_mut(type_url)
            {
                // Until a response settles them.
                w.known.keep_claims(claimed);
            }
            response
        } else if asked.wildcard_added {
            self.respond(src, type_url, Consider::Subscribed(None), answer)
        } else if !answer.is_empty() {
            self.respond(src, type_url, Consider::Names(answer), answer)
        } else {
            Ok(None)
        };
        reply.push(type_url, response);
        Ok(reply)
    }

    /// Regenerates `type_url` for a push, if the proxy watches it and `scope` includes it;
    /// `None` when nothing changed for this proxy.
    pub fn push_type(
        &mut self,
        src: &dyn ResourceSource,
        type_url: &str,
        scope: &PushScope,
    ) -> Result<Option<DeltaDiscoveryResponse>, GenerateError> {
        if !scope.types().any(|t| t == type_url) {
            return Ok(None);
        }
        self.respond(src, type_url, Consider::Subscribed(scope.hosts()), &[])
    }

    /// Every response of a push, in push order (stops at the first generation error).
    pub fn on_push(
        &mut self,
        src: &dyn ResourceSource,
        scope: &PushScope,
    ) -> Result<Vec<DeltaDiscoveryResponse>, GenerateError> {
        let mut out = Vec::new();
        for type_url in scope.types() {
            out.extend(self.push_type(src, type_url, scope)?);
        }
        Ok(out)
    }

    /// The sync state of every watched type.
    pub fn status(&self) -> Statuses {
        self.watches
            .values()
            .map(|w| status::published(&w.status, w.wildcard, w.known.len()))
            .collect()
    }

    /// The response for `consider`, if any. `answer` (sorted): names the response must
    /// carry, in `resources` if they exist and in `removed_resources` if not; a first
    /// response only reports the missing ones (the proxy's claims decide the rest).
    fn respond(
        &mut self,
        src: &dyn ResourceSource,
        type_url: &str,
        consider: Consider<'_>,
        answer: &[String],
    ) -> Result<Option<DeltaDiscoveryResponse>, GenerateError> {
        let Some(w) = self.watches.get_mut(type_url) else {
            return Ok(None);
        };
        let (claimed, force, resend) = match consider {
            // A reconnect (versions named) is answered only if something differs.
            Consider::First(claimed) => (Some(claimed), claimed.is_empty(), &[][..]),
            _ => (None, false, answer),
        };
        let (resources, hosts) = match consider {
            Consider::Names(names) => (src.resources(type_url, &self.proxy, names)?, None),
            Consider::First(_) | Consider::Subscribed(_) => {
                let hosts = match consider {
                    Consider::Subscribed(hosts) => hosts,
                    _ => None,
                };
                let all = subscribed(
                    src,
                    &self.proxy,
                    type_url,
                    w.wildcard,
                    w.status.names.as_slice(),
                    hosts,
                )?;
                (all, Some(hosts))
            }
        };
        // From here on the proxy holds every one of `resources`: those it lacked are sent,
        // and those asked for.
        let mut upserts = w.known.update(&resources, claimed);
        if !resend.is_empty() {
            let lacked: HashSet<&str> = upserts.iter().map(|r| r.name.as_str()).collect();
            upserts = resources
                .iter()
                .filter(|r| {
                    lacked.contains(r.name.as_str()) || resend.binary_search(&r.name).is_ok()
                })
                .collect();
        }
        let report_missing = answer;
        // Gone: what the proxy holds (in scope) that no longer exists, and names it just
        // asked for that do not. (Holding no more than what exists, nothing is gone.)
        let mut removed = BTreeSet::new();
        let scan = hosts.is_some() && w.known.len() > resources.len();
        if scan || !report_missing.is_empty() {
            let present: HashSet<&str> = resources.iter().map(|r| r.name.as_str()).collect();
            if let Some(hosts) = hosts.filter(|_| scan) {
                removed.extend(
                    w.known
                        .names()
                        .filter(|n| host_selected(hosts, n) && !present.contains(n))
                        .map(String::from),
                );
            }
            removed.extend(
                report_missing
                    .iter()
                    .filter(|n| !present.contains(n.as_str()))
                    .cloned(),
            );
        }
        if !force && upserts.is_empty() && removed.is_empty() {
            return Ok(None);
        }
        if !removed.is_empty() {
            w.known.retain(|n| !removed.contains(n));
        }

        let (version, nonce) = self.nonces.next(src.version());
        status::record_sent(&mut w.status, &version, &nonce, w.wildcard, w.known.len());
        let shared: Vec<Arc<XdsResource>> = upserts.iter().map(|r| Arc::clone(r)).collect();
        // Encoded once for every stream sending them; else each resource with its version.
        let encoded_resources = src.delta_resources(&shared);
        let resources = match encoded_resources {
            Some(_) => Vec::new(),
            None => shared
                .iter()
                .map(|r| DeltaResource {
                    version: version_of(r, src.version()),
                    resource: Arc::clone(r),
                })
                .collect(),
        };
        let response = DeltaDiscoveryResponse {
            system_version_info: version,
            encoded_resources,
            resources,
            type_url: type_url.to_string(),
            removed_resources: removed.into_iter().collect(),
            nonce,
            ..Default::default()
        };
        // A changed cluster re-warms and waits for its endpoints: make them "unsent".
        if type_url == CLUSTER
            && let Some(eds) = self.watches.get_mut(ENDPOINT)
        {
            let changed: HashSet<&str> = upserts.iter().map(|r| r.name.as_str()).collect();
            if !changed.is_empty() {
                eds.known.retain(|n| !changed.contains(n));
            }
        }
        Ok(Some(response))
    }
}

#[cfg(test)]
mod tests;
