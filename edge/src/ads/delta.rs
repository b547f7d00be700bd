//! One incremental (Delta) ADS stream, without I/O.
//!
//! Per type URL it keeps the subscription (wildcard and/or names) and the version of every
//! resource the proxy holds (seeded from `initial_resource_versions`, so a reconnect to any
//! edge resends only what changed: versions are content hashes). A response carries the
//! resources whose version differs and the names that went away (`removed_resources`).
//!
//! Subscription changes are deltas, so they are applied whatever the nonce (a stale
//! request's subscriptions would otherwise be lost); the nonce only decides ACK/NACK
//! bookkeeping. Explicitly subscribed names that do not exist are reported in
//! `removed_resources`, so the proxy stops waiting for them.

use super::error::{AdsError, Result};
use super::scope::{PushScope, host_selected};
use super::source::{ResourceSource, subscribed};
use super::status::{Nonces, Reply, RequestKind, TypeStatus};
use super::transport::{DeltaResource, DeltaResponse as DeltaDiscoveryResponse};
use crate::proxy::Proxy;
use crate::xds::types::{CLUSTER, ENDPOINT, is_wildcard};
use crate::xds::{GenerateError, XdsResource};
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

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
    names: BTreeSet<String>,
    /// Resource name → version the proxy holds.
    known: HashMap<String, String>,
    status: TypeStatus,
}

/// Which resources a response considers.
enum Consider<'a> {
    /// Everything subscribed (of these hosts' clusters, when given).
    Subscribed(Option<&'a BTreeSet<String>>),
    /// Just these names (newly subscribed).
    Names(&'a [String]),
}

/// A resource's Delta version: its content hash.
fn version_of(r: &XdsResource) -> String {
    format!("{:016x}", r.hash)
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
                names: BTreeSet::new(),
                known: req
                    .initial_resource_versions
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
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

        let mut added = Vec::new();
        let mut wildcard_added = false;
        for name in &req.resource_names_subscribe {
            if name == "*" {
                wildcard_added |= !w.wildcard;
                w.wildcard = true;
            } else if w.names.insert(name.clone()) {
                added.push(name.clone());
            }
        }
        for name in &req.resource_names_unsubscribe {
            if name == "*" {
                w.wildcard = false;
                let names = &w.names;
                w.known.retain(|k, _| names.contains(k));
            } else {
                w.names.remove(name);
                if !w.wildcard {
                    w.known.remove(name);
                }
            }
        }

        let mut reply = Reply::new(kind);
        let response = if first || wildcard_added {
            self.respond(src, type_url, Consider::Subscribed(None), &added, first)
        } else if !added.is_empty() {
            self.respond(src, type_url, Consider::Names(&added), &added, false)
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
        self.respond(
            src,
            type_url,
            Consider::Subscribed(scope.hosts()),
            &[],
            false,
        )
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
        force: bool,
    ) -> Result<Option<DeltaDiscoveryResponse>, GenerateError> {
        let Some(w) = self.watches.get_mut(type_url) else {
            return Ok(None);
        };
        let (resources, hosts) = match consider {
            Consider::Subscribed(hosts) => {
                let all = subscribed(src, &self.proxy, type_url, w.wildcard, &w.names, hosts)?;
                (all, Some(hosts))
            }
            Consider::Names(names) => (src.resources(type_url, &self.proxy, names)?, None),
        };
        let present: HashSet<&str> = resources.iter().map(|r| r.name.as_str()).collect();
        let upserts: Vec<(&Arc<XdsResource>, String)> = resources
            .iter()
            .map(|r| (r, version_of(r)))
            .filter(|(r, v)| w.known.get(&r.name) != Some(v))
            .collect();
        // Gone: what the proxy holds (in scope) that no longer exists, and names it just
        // asked for that do not.
        let mut removed: BTreeSet<String> = match hosts {
            Some(hosts) => w
                .known
                .keys()
                .filter(|n| host_selected(hosts, n) && !present.contains(n.as_str()))
                .cloned()
                .collect(),
            None => BTreeSet::new(),
        };
        removed.extend(
            report_missing
                .iter()
                .filter(|n| !present.contains(n.as_str()))
                .cloned(),
        );
        if !force && upserts.is_empty() && removed.is_empty() {
            return Ok(None);
        }
        for (r, v) in &upserts {
            w.known.insert(r.name.clone(), v.clone());
        }
        for n in &removed {
            w.known.remove(n);
        }

        let (version, nonce) = self.nonces.next(src.version());
        w.status.sent(&version, &nonce);
        let changed: Vec<String> = upserts.iter().map(|(r, _)| r.name.clone()).collect();
        let response = DeltaDiscoveryResponse {
            system_version_info: version,
            resources: upserts
                .into_iter()
                .map(|(r, v)| DeltaResource {
                    resource: r.clone(),
                    version: v,
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
            for name in &changed {
                eds.known.remove(name);
            }
        }
        Ok(Some(response))
    }
}

#[cfg(test)]
mod tests;
