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
//! bookkeeping. Explicitly subscribed names that do not exist are reported in
//! `removed_resources`, so the proxy stops waiting for them.
//!
//! The first request of a type is always answered, empty if need be: Envoy completes a
//! wildcard subscription's initial fetch on an empty response (its `WatchMap` notifies
//! wildcard watches of an empty update). Not so a reconnect, whose request names the
//! versions the proxy holds: it had a response of the type before, so it is answered only
//! if something differs, and one holding every current version is sent nothing.

use super::error::{AdsError, Result};
use super::scope::{PushScope, host_selected};
use super::sent::Names;
use super::source::{ResourceSource, subscribed};
use super::status::{Nonces, Reply, RequestKind, TypeStatus};
use super::transport::{DeltaResource, DeltaResponse as DeltaDiscoveryResponse};
use crate::proxy::Proxy;
use crate::xds::GenerateError;
use crate::xds::types::{CLUSTER, ENDPOINT, is_wildcard};
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use known::{Known, version_of};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

mod known;

/// The Delta state of one ADS stream.
#[derive(Debug)]
pub struct DeltaStream {
    proxy: Proxy,
    watches: BTreeMap<String, Watch>,
    nonces: Nonces,
}

#[derive(Debug)]
struct Watch {
    wildcard: bool,
    /// Explicitly subscribed names.
    names: Names,
    /// What the proxy holds.
    known: Known,
    status: TypeStatus,
}

impl Watch {
    /// Applies a request's subscription deltas; returns the names newly subscribed
    /// (sorted) and whether `*` was.
    fn subscribe(&mut self, req: &DeltaDiscoveryRequest) -> (Vec<String>, bool) {
        let mut wildcard_added = false;
        for name in &req.resource_names_subscribe {
            if name == "*" {
                wildcard_added |= !self.wildcard;
                self.wildcard = true;
            }
        }
        let mut wildcard_dropped = false;
        let mut gone: Vec<&str> = Vec::new();
        for name in &req.resource_names_unsubscribe {
            if name == "*" {
                wildcard_dropped |= self.wildcard;
                self.wildcard = false;
            } else {
                gone.push(name);
            }
        }
        gone.sort_unstable();
        let unsubscribed = |n: &str| gone.binary_search(&n).is_ok();
        let mut added: Vec<String> = req
            .resource_names_subscribe
            .iter()
            .filter(|n| *n != "*" && !self.names.contains(n) && !unsubscribed(n))
            .cloned()
            .collect();
        added.sort_unstable();
        added.dedup();
        let dropped = gone.iter().any(|n| self.names.contains(n));
        if !added.is_empty() || dropped {
            // Interned again only when the subscription changes.
            let kept = self.names.iter().filter(|n| !unsubscribed(n));
            self.names = Names::new(kept.chain(&added).map(String::as_str));
        }
        // Without `*`, the proxy holds only what it names: forget the rest.
        if !self.wildcard && (wildcard_dropped || !gone.is_empty()) {
            let names = &self.names;
            self.known.retain(|n| names.contains(n));
        }
        (added, wildcard_added)
    }
}

/// Which resources a response considers.
enum Consider<'a> {
    /// The first response of the type: everything subscribed, against the versions the
    /// proxy claims to hold (`initial_resource_versions`; none: always answered).
    First(&'a HashMap<String, String>),
    /// Everything subscribed (of these hosts' clusters, when given).
    Subscribed(Option<&'a BTreeSet<String>>),
    /// Just these names (newly subscribed).
    Names(&'a [String]),
}

impl DeltaStream {
    pub fn new(proxy: Proxy) -> Self {
        DeltaStream {
            proxy,
            watches: BTreeMap::new(),
            nonces: Nonces::default(),
        }
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
        let first = !self.watches.contains_key(type_url);
        let w = self
            .watches
            .entry(type_url.to_string())
            .or_insert_with(|| Watch {
                // Legacy wildcard: CDS/LDS whose first request names nothing.
                wildcard: is_wildcard(type_url) && req.resource_names_subscribe.is_empty(),
                names: Names::default(),
                known: Known::default(),
                status: TypeStatus::new(type_url),
            });

        let nonce = req.response_nonce.as_str();
        let kind = if first {
            RequestKind::Initial
        } else if nonce.is_empty() {
            RequestKind::Subscribe
        } else if nonce != w.status.nonce_sent {
            RequestKind::Stale
        } else if let Some(err) = &req.error_detail {
            w.status.nacked(nonce, &err.message);
            RequestKind::Nack(err.message.clone())
        } else {
            let version = w.status.version_sent.clone();
            w.status.acked(nonce, &version);
            RequestKind::Ack
        };

        let (added, wildcard_added) = w.subscribe(req);

        let mut reply = Reply::new(kind);
        let claimed = &req.initial_resource_versions;
        let response = if first {
            let response = self.respond(src, type_url, Consider::First(claimed), &added);
            if response.is_err()
                && let Some(w) = self.watches.get_mut(type_url)
            {
                // Until a response settles them.
                w.known.keep_claims(claimed);
            }
            response
        } else if wildcard_added {
            self.respond(src, type_url, Consider::Subscribed(None), &added)
        } else if !added.is_empty() {
            self.respond(src, type_url, Consider::Names(&added), &added)
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
    pub fn status(&self) -> Vec<TypeStatus> {
        self.watches
            .values()
            .map(|w| TypeStatus {
                wildcard: w.wildcard,
                subscribed: w.names.len(),
                resources: w.known.len(),
                ..w.status.clone()
            })
            .collect()
    }

    fn respond(
        &mut self,
        src: &dyn ResourceSource,
        type_url: &str,
        consider: Consider<'_>,
        report_missing: &[String],
    ) -> Result<Option<DeltaDiscoveryResponse>, GenerateError> {
        let Some(w) = self.watches.get_mut(type_url) else {
            return Ok(None);
        };
        let (claimed, force) = match consider {
            // A reconnect (versions named) is answered only if something differs.
            Consider::First(claimed) => (Some(claimed), claimed.is_empty()),
            _ => (None, false),
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
                    w.names.iter(),
                    hosts,
                )?;
                (all, Some(hosts))
            }
        };
        // From here on the proxy holds every one of `resources`: those it lacked are sent.
        let upserts = w.known.update(&resources, claimed);
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
        for n in &removed {
            w.known.remove(n);
        }

        let (version, nonce) = self.nonces.next(src.version());
        w.status.sent(&version, &nonce);
        let response = DeltaDiscoveryResponse {
            system_version_info: version,
            resources: upserts
                .iter()
                .map(|r| DeltaResource {
                    resource: Arc::clone(r),
                    version: version_of(r),
                })
                .collect(),
            type_url: type_url.to_string(),
            removed_resources: removed.into_iter().collect(),
            nonce,
            ..Default::default()
        };
        // A changed cluster re-warms and waits for its endpoints: make them "unsent".
        if type_url == CLUSTER
            && let Some(eds) = self.watches.get_mut(ENDPOINT)
        {
            for r in &upserts {
                eds.known.remove(&r.name);
            }
        }
        Ok(Some(response))
    }
}

#[cfg(test)]
mod tests;
