//! One state-of-the-world ADS stream, without I/O: requests and pushes in, responses out.
//!
//! Per type URL it keeps the subscription (wildcard or named), the hash of every resource
//! last sent, and the nonce/version sent and acknowledged. The rules are those of Envoy's
//! xDS protocol document:
//!
//! - every response carries a fresh nonce; a request answering an older nonce is stale and
//!   ignored (so a push may go out while a response is un-ACKed: "update during ACK");
//! - the latest nonce without `error_detail` is an ACK, with it a NACK: recorded, nothing
//!   resent, the proxy keeps its last good config;
//! - CDS and LDS are state of the world: the full set, sent only when some resource
//!   changed or went away; EDS and RDS send only requested resources that changed or were
//!   never sent, and names requested before they exist go out when they appear;
//! - a cluster that changed makes its endpoints "unsent", so the re-warming cluster gets
//!   its ClusterLoadAssignment again (Envoy waits for it);
//! - `*` subscribes to everything of a type; so does an empty `resource_names` for CDS and
//!   LDS, but only while no request of that type on the stream has named anything (the
//!   protocol's legacy wildcard). After that an empty list unsubscribes from everything:
//!   nothing is sent, and what was sent is forgotten (a re-subscription resends it).
//!
//! Types this server does not generate are ignored without keeping anything, and the
//! names a stream subscribes to are bounded (`limits`).

use super::by_type::ByType;
use super::error::{AdsError, Result};
use super::limits::{self, DEFAULT_MAX_NAMES};
use super::scope::{PushScope, host_selected};
use super::sent::{Names, SentSet};
use super::source::{ResourceSource, subscribed};
use super::status::{self, Nonces, Reply, RequestKind, Statuses, TypeStatus};
use super::transport::{SotwRequestFields, SotwResponse as DiscoveryResponse};
use crate::proxy::Proxy;
use crate::xds::types::{CLUSTER, ENDPOINT, is_wildcard};
use crate::xds::{GenerateError, XdsResource};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The SotW state of one ADS stream.
#[derive(Debug)]
pub struct SotwStream {
    proxy: Arc<Proxy>,
    /// By type URL, one of [`PUSH_ORDER`] (only served types are watched).
    watches: ByType<Watch>,
    nonces: Nonces,
    /// Names the stream may subscribe to, over all types.
    max_names: usize,
}

#[derive(Debug)]
struct Watch {
    wildcard: bool,
    /// A request of this type named a resource (`*` included): an empty list no longer
    /// means wildcard.
    named: bool,
    /// What the proxy was last sent.
    sent: SentSet,
    status: Arc<TypeStatus>,
}

impl Watch {
    fn new(type_url: &str) -> Self {
        Watch {
            wildcard: false,
            named: false,
            sent: SentSet::default(),
            status: Arc::new(TypeStatus::new(type_url)),
        }
    }

    /// The subscribed resources of `type_url` (those of `hosts` only, when given).
    fn generate(
        &self,
        src: &dyn ResourceSource,
        proxy: &Proxy,
        type_url: &str,
        hosts: Option<&BTreeSet<String>>,
    ) -> Result<Vec<Arc<XdsResource>>, GenerateError> {
        subscribed(
            src,
            proxy,
            type_url,
            self.wildcard,
            self.status.names.as_slice(),
            hosts,
        )
    }
}

/// `(wildcard, names)` of a SotW request: `*` is wildcard, and so are no names for CDS/LDS
/// while `legacy` (no earlier request of the type on this stream named anything).
/// `current` is the list the stream holds: an ACK that repeats it in the same (sorted)
/// order costs one comparison of bytes. Any other list is checked to be UTF-8 and
/// interned (found, most often: every stream of a scope asks for the same).
fn subscription<N: AsRef<[u8]>>(
    type_url: &str,
    names: &[N],
    legacy: bool,
    current: Option<&Names>,
) -> Result<(bool, Names)> {
    let wildcard = names.iter().any(|n| n.as_ref() == b"*")
        || (names.is_empty() && legacy && is_wildcard(type_url));
    if let Some(current) = current
        && !current.is_empty()
        && current.len() == names.len()
        && current
            .iter()
            .map(String::as_bytes)
            .eq(names.iter().map(AsRef::as_ref))
    {
        return Ok((wildcard, current.clone()));
    }
    let mut not_utf8 = false;
    let interned = Names::new(names.iter().filter_map(|n| {
        let name = std::str::from_utf8(n.as_ref()).ok();
        not_utf8 |= name.is_none();
        name
    }));
    if not_utf8 {
        return Err(AdsError::NameNotUtf8 {
            type_url: type_url.to_string(),
        });
    }
    Ok((wildcard, interned))
}

impl SotwStream {
    pub fn new(proxy: impl Into<Arc<Proxy>>) -> Self {
        SotwStream {
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

    /// Whether the proxy subscribed to `type_url`.
    pub fn watches(&self, type_url: &str) -> bool {
        self.watches.contains_key(type_url)
    }

    /// Handles one request from the proxy.
    pub fn on_request(
        &mut self,
        src: &dyn ResourceSource,
        req: &impl SotwRequestFields,
    ) -> Result<Reply<DiscoveryResponse>> {
        let type_url = req.type_url();
        if type_url.is_empty() {
            return Err(AdsError::MissingTypeUrl);
        }
        let Some(type_url) = limits::served(type_url) else {
            return Ok(Reply::new(RequestKind::Unsupported));
        };
        let held = self.watches.get(type_url);
        let legacy = held.is_none_or(|w| !w.named);
        let (wildcard, names) = subscription(
            type_url,
            req.resource_names(),
            legacy,
            held.map(|w| &w.status.names),
        )?;
        let named = !req.resource_names().is_empty();
        let others: usize = self
            .watches
            .iter()
            .filter(|(t, _)| *t != type_url)
            .map(|(_, w)| w.status.names.len())
            .sum();
        limits::check_names(others + names.len(), self.max_names, type_url)?;
        let nonce = req.response_nonce();

        // First request of the type (or a proxy that reconnected with a nonce from
        // elsewhere): (re)start the watch and always respond.
        if nonce.is_empty() || !self.watches.contains_key(type_url) {
            let w = self
                .watches
                .get_or_insert_with(type_url, || Watch::new(type_url));
            w.wildcard = wildcard;
            Arc::make_mut(&mut w.status).names = names;
            w.named |= named;
            w.sent.clear();
            let mut reply = Reply::new(RequestKind::Initial);
            reply.push(type_url, self.respond(src, type_url, None, true));
            return Ok(reply);
        }

        let Some(w) = self.watches.get_mut(type_url) else {
            return Ok(Reply::new(RequestKind::Stale));
        };
        if nonce != w.status.nonce_sent {
            return Ok(Reply::new(RequestKind::Stale));
        }
        let kind = match req.error_detail() {
            Some(err) => {
                RequestKind::Nack(Arc::make_mut(&mut w.status).nacked(nonce, &err.message))
            }
            None => {
                Arc::make_mut(&mut w.status).acked(nonce, req.version_info(), &w.sent);
                RequestKind::Ack
            }
        };
        let mut reply = Reply::new(kind);
        w.named |= named;
        if w.wildcard == wildcard && w.status.names == names {
            return Ok(reply);
        }
        // The subscription changed. Unsubscribed from everything of the type: nothing to
        // send, and what was sent is forgotten.
        if !wildcard && names.is_empty() {
            w.sent.clear();
            w.wildcard = false;
            Arc::make_mut(&mut w.status).names = names;
            return Ok(reply);
        }
        // Otherwise CDS/LDS resend their whole set if it differs from the last one (fewer
        // names included); other types forget what was sent for names no longer watched
        // (so a re-subscription resends them) and send what is newly requested.
        if !wildcard && !is_wildcard(type_url) {
            w.sent.retain(|n| names.contains(n));
        }
        w.wildcard = wildcard;
        Arc::make_mut(&mut w.status).names = names;
        reply.push(type_url, self.respond(src, type_url, None, false));
        Ok(reply)
    }

    /// Regenerates `type_url` for a push, if the proxy watches it and `scope` includes it;
    /// `None` when nothing changed for this proxy.
    pub fn push_type(
        &mut self,
        src: &dyn ResourceSource,
        type_url: &str,
        scope: &PushScope,
    ) -> Result<Option<DiscoveryResponse>, GenerateError> {
        if !scope.types().any(|t| t == type_url) {
            return Ok(None);
        }
        self.respond(src, type_url, scope.hosts(), false)
    }

    /// Every response of a push, in push order (stops at the first generation error).
    pub fn on_push(
        &mut self,
        src: &dyn ResourceSource,
        scope: &PushScope,
    ) -> Result<Vec<DiscoveryResponse>, GenerateError> {
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
            .map(|w| status::published(&w.status, w.wildcard, w.sent.len()))
            .collect()
    }

    fn respond(
        &mut self,
        src: &dyn ResourceSource,
        type_url: &str,
        hosts: Option<&BTreeSet<String>>,
        force: bool,
    ) -> Result<Option<DiscoveryResponse>, GenerateError> {
        // Changed clusters re-warm and wait for their endpoints (below): only endpoints
        // already sent need forgetting.
        let endpoints_sent =
            type_url == CLUSTER && self.watches.get(ENDPOINT).is_some_and(|e| e.sent.len() > 0);
        let Some(w) = self.watches.get_mut(type_url) else {
            return Ok(None);
        };
        let resources = w.generate(src, &self.proxy, type_url, hosts)?;
        let changed: Vec<&Arc<XdsResource>> = resources.iter().filter(|r| !w.sent.has(r)).collect();
        let changed_clusters = if endpoints_sent {
            sorted_names(changed.iter().copied())
        } else {
            Vec::new()
        };

        let to_send: Vec<&Arc<XdsResource>> = if is_wildcard(type_url) {
            // State of the world: any change or removal resends the full set.
            if !force && changed.is_empty() && resources.len() == w.sent.len() {
                return Ok(None);
            }
            w.sent.replace(&resources);
            resources.iter().collect()
        } else {
            // Only what changed. A resource that disappeared is forgotten, so it is sent
            // again should it come back.
            let present = sorted_names(&resources);
            // Most names are of hosts the push is not about: that test first.
            w.sent
                .retain(|n| !host_selected(hosts, n) || present.binary_search(&n).is_ok());
            if !force && changed.is_empty() {
                return Ok(None);
            }
            w.sent.insert_all(&changed);
            changed
        };

        let (version, nonce) = self.nonces.next(src.version());
        status::record_sent(&mut w.status, &version, &nonce, w.wildcard, w.sent.len());
        let mut resources: Vec<Arc<XdsResource>> = to_send.into_iter().cloned().collect();
        // Encoded once for every stream sending them: then not kept here.
        let encoded_resources = src.sotw_resources(&resources);
        if encoded_resources.is_some() {
            resources = Vec::new();
        }
        let response = DiscoveryResponse {
            version_info: version,
            encoded_resources,
            resources,
            type_url: type_url.to_string(),
            nonce,
            control_plane: None,
        };
        if !changed_clusters.is_empty()
            && let Some(eds) = self.watches.get_mut(ENDPOINT)
        {
            eds.sent
                .retain(|n| changed_clusters.binary_search(&n).is_err());
        }
        Ok(Some(response))
    }
}

/// The names of `resources`, sorted for lookups (the generator's lists come sorted; a
/// hash set would hash every name of every response).
fn sorted_names<'a>(resources: impl IntoIterator<Item = &'a Arc<XdsResource>>) -> Vec<&'a str> {
    let mut names: Vec<&str> = resources.into_iter().map(|r| r.name.as_str()).collect();
    if !names.is_sorted() {
        names.sort_unstable();
    }
    names
}

#[cfg(test)]
mod tests;
