//! A state-of-the-world ADS client, as Envoy speaks it: every request carries the full
//! set of names for its type, ACKs echo the response's version and nonce, NACKs keep the
//! last accepted version and carry `error_detail`.

use super::decode::{DecodeError, Kind};
use super::tracker::Tracker;
use super::verified::Verified;
use super::{Outcome, PackedNode, Shared, nack_status};
use crate::wire::{SotwResponse, scan};
use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use prost::Message;
use std::sync::Arc;

#[derive(Debug, Default)]
struct TypeState {
    /// Last accepted version.
    version: String,
    /// Last nonce received.
    nonce: String,
}

#[derive(Debug)]
pub struct SotwClient {
    tracker: Tracker,
    node: PackedNode,
    types: [TypeState; 4],
}

impl SotwClient {
    pub fn new(shared: Arc<Shared>, node: Node) -> Self {
        SotwClient {
            tracker: Tracker::new(shared),
            node: PackedNode::new(&node),
            types: Default::default(),
        }
    }

    /// The first requests of a stream, as Envoy sends them: CDS and LDS wildcard, the node
    /// on the first; on a reconnect, with the versions last accepted, and EDS and RDS for
    /// every name the clusters and listeners held reference, answered or not (the new
    /// server answers them without waiting for CDS, and a CDS answer that changes nothing
    /// subscribes nothing new: a name left out here would never be asked for again).
    pub fn start(&mut self, out: &mut Vec<DiscoveryRequest>) {
        for kind in [Kind::Cluster, Kind::Listener, Kind::Endpoint, Kind::Route] {
            // A nonce of the old stream means nothing to the new one.
            self.types[kind.index()].nonce.clear();
            let subscribed = self
                .tracker
                .names_for(kind)
                .is_none_or(|names| !names.children().is_empty());
            if !subscribed {
                continue;
            }
            let mut req = self.request(kind, None);
            if out.is_empty() {
                req.node = Some(self.node.unpack());
            }
            out.push(req);
        }
    }

    pub fn expects_change(&self) -> bool {
        self.tracker.expects_change()
    }

    pub fn is_synced(&self) -> bool {
        self.tracker.is_synced()
    }

    /// Handles one encoded response; pushes the requests to send onto `out`. A copy of a
    /// response already verified is recognised by its resources' hash and not decoded;
    /// `Err` when the message is not a `DiscoveryResponse` at all.
    pub fn on_message(
        &mut self,
        msg: Bytes,
        out: &mut Vec<DiscoveryRequest>,
    ) -> Result<Outcome, prost::DecodeError> {
        let mut key = None;
        if let Some(head) = scan::head(&msg)
            && let Some(kind) = Kind::from_type_url(head.type_url)
        {
            let cache = &self.tracker.shared().verified;
            if let Some(verified) = cache.lookup(kind, head.key, head.bytes) {
                let (version, nonce) = (head.version.to_owned(), head.nonce.to_owned());
                return Ok(self.accept(kind, version, nonce, &verified, out));
            }
            key = Some(head.key);
        }
        let resp = SotwResponse::decode(msg)?;
        Ok(self.respond(resp, key, out))
    }

    /// Handles one decoded response (verified, never looked up: tests and the probe).
    pub fn on_response(&mut self, resp: SotwResponse, out: &mut Vec<DiscoveryRequest>) -> Outcome {
        self.respond(resp, None, out)
    }

    /// Verifies `resp` (kept under `key` when it verifies), then ACKs or NACKs it.
    fn respond(
        &mut self,
        resp: SotwResponse,
        key: Option<u128>,
        out: &mut Vec<DiscoveryRequest>,
    ) -> Outcome {
        let snapshot = resp.version_info.parse().ok();
        let Some(kind) = Kind::from_type_url(&resp.type_url) else {
            let e = DecodeError::UnknownType(resp.type_url.clone());
            out.push(DiscoveryRequest {
                type_url: resp.type_url,
                response_nonce: resp.nonce,
                error_detail: Some(nack_status(&e)),
                ..Default::default()
            });
            return Outcome {
                nack: Some(e),
                snapshot,
                ..Default::default()
            };
        };
        let shared = self.tracker.shared();
        let resources = resp.resources.iter().map(Ok);
        let verified =
            shared
                .verified
                .verify(kind, key, &shared.target.marker, resources, Box::default());
        match verified {
            Ok(v) => self.accept(kind, resp.version_info, resp.nonce, &v, out),
            Err(e) => {
                self.types[kind.index()].nonce = resp.nonce;
                out.push(self.request(kind, Some(&e)));
                Outcome {
                    nack: Some(e),
                    snapshot,
                    ..Default::default()
                }
            }
        }
    }

    /// Applies a verified response and ACKs it (then subscribes to what it references).
    fn accept(
        &mut self,
        kind: Kind,
        version: String,
        nonce: String,
        verified: &Verified,
        out: &mut Vec<DiscoveryRequest>,
    ) -> Outcome {
        let snapshot = version.parse().ok();
        let state = &mut self.types[kind.index()];
        state.nonce = nonce;
        state.version = version;
        let applied = self.tracker.apply(kind, verified, &[], true);
        out.push(self.request(kind, None));
        if applied.children_changed.is_some() {
            let next = match kind {
                Kind::Cluster => Kind::Endpoint,
                _ => Kind::Route,
            };
            out.push(self.request(next, None));
        }
        let (synced, converged) = self.tracker.settle(verified.marked);
        Outcome {
            nack: None,
            synced,
            converged,
            snapshot,
        }
    }

    /// A request for `kind` with the current names, answering the last nonce: an ACK (or
    /// a subscription change), or a NACK when `error` is given.
    fn request(&self, kind: Kind, error: Option<&DecodeError>) -> DiscoveryRequest {
        let state = &self.types[kind.index()];
        DiscoveryRequest {
            version_info: state.version.clone(),
            resource_names: self
                .tracker
                .names_for(kind)
                .map(|i| i.children().iter().map(|n| String::from(&**n)).collect())
                .unwrap_or_default(),
            type_url: kind.type_url().to_string(),
            response_nonce: state.nonce.clone(),
            error_detail: error.map(nack_status),
            ..Default::default()
        }
    }
}
