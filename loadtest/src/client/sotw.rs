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
    node: Option<Node>,
    types: [TypeState; 4],
}

impl SotwClient {
    pub fn new(shared: Arc<Shared>, node: Node) -> Self {
        SotwClient {
            tracker: Tracker::new(shared),
            node: Some(node),
            types: Default::default(),
        }
    }

    /// The first requests: CDS and LDS wildcard, the node on the first.
    pub fn start(&mut self, out: &mut Vec<DiscoveryRequest>) {
        for kind in [Kind::Cluster, Kind::Listener] {
            let mut req = self.request(kind, None);
            req.node = self.node.take();
            out.push(req);
        }
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
