//! A state-of-the-world ADS client, as Envoy speaks it: every request carries the full
//! set of names for its type, ACKs echo the response's version and nonce, NACKs keep the
//! last accepted version and carry `error_detail`.

use super::decode::{DecodeError, Kind};
use super::tracker::Tracker;
use super::{Outcome, Shared, decode_all, nack_status};
use crate::wire::SotwResponse;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
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
    node: Node,
    types: [TypeState; 4],
}

impl SotwClient {
    pub fn new(shared: Arc<Shared>, node: Node) -> Self {
        SotwClient {
            tracker: Tracker::new(shared),
            node,
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
                req.node = Some(self.node.clone());
            }
            out.push(req);
        }
    }

    /// The snapshot version of `version_info` (the edge's), if it is one.
    pub fn snapshot_version(resp: &SotwResponse) -> Option<u64> {
        resp.version_info.parse().ok()
    }

    pub fn expects_change(&self) -> bool {
        self.tracker.expects_change()
    }

    pub fn is_synced(&self) -> bool {
        self.tracker.is_synced()
    }

    /// Handles one response; pushes the requests to send onto `out`.
    pub fn on_response(&mut self, resp: SotwResponse, out: &mut Vec<DiscoveryRequest>) -> Outcome {
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
                ..Default::default()
            };
        };
        let marker = &self.tracker.shared().target.marker;
        let decoded = decode_all(
            kind,
            marker,
            resp.resources
                .into_iter()
                .map(|a| Ok((a.type_url, a.value))),
        );
        let state = &mut self.types[kind.index()];
        state.nonce = resp.nonce;
        let (summaries, marked) = match decoded {
            Ok(d) => d,
            Err(e) => {
                out.push(self.request(kind, Some(&e)));
                return Outcome {
                    nack: Some(e),
                    ..Default::default()
                };
            }
        };
        state.version = resp.version_info;
        let applied = self.tracker.apply(kind, summaries, &[], true);
        out.push(self.request(kind, None));
        if applied.children_changed.is_some() {
            let next = match kind {
                Kind::Cluster => Kind::Endpoint,
                _ => Kind::Route,
            };
            out.push(self.request(next, None));
        }
        let (synced, converged) = self.tracker.settle(marked);
        Outcome {
            nack: None,
            synced,
            converged,
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
                .map(|i| i.children().iter().map(|n| n.to_string()).collect())
                .unwrap_or_default(),
            type_url: kind.type_url().to_string(),
            response_nonce: state.nonce.clone(),
            error_detail: error.map(nack_status),
            ..Default::default()
        }
    }
}
