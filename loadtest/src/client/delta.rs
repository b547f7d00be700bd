//! An incremental (Delta) ADS client: ACKs carry only the nonce; subscriptions change by
//! `resource_names_subscribe`/`unsubscribe`; responses carry upserts and removals.

use super::decode::{DecodeError, Kind};
use super::index::DepIndex;
use super::tracker::Tracker;
use super::verified::{Verified, Versions};
use super::{Outcome, PackedNode, Shared, nack_status};
use crate::wire::{DeltaResponse, scan};
use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use prost::Message;
use std::cmp::Ordering;
use std::sync::Arc;

#[derive(Debug)]
pub struct DeltaClient {
    tracker: Tracker,
    node: PackedNode,
    /// Per type, the version of every resource held: `initial_resource_versions` on a
    /// reconnect, so the new server sends only what differs. Shared between proxies
    /// that received the same responses from the same state (see [`Verified`]).
    versions: [Arc<Versions>; 4],
}

impl DeltaClient {
    pub fn new(shared: Arc<Shared>, node: Node) -> Self {
        DeltaClient {
            versions: std::array::from_fn(|_| shared.empty_versions.clone()),
            tracker: Tracker::new(shared),
            node: PackedNode::new(&node),
        }
    }

    /// The first requests of a stream: CDS and LDS wildcard (no names), the node on the
    /// first; on a reconnect, with `initial_resource_versions` of everything held, and EDS
    /// and RDS subscriptions for the names already known.
    pub fn start(&mut self, out: &mut Vec<DeltaDiscoveryRequest>) {
        for kind in [Kind::Cluster, Kind::Listener, Kind::Endpoint, Kind::Route] {
            let subscribe: Vec<String> = match self.tracker.names_for(kind) {
                Some(index) => index
                    .children()
                    .iter()
                    .map(|n| String::from(&**n))
                    .collect(),
                None => Vec::new(),
            };
            if matches!(kind, Kind::Endpoint | Kind::Route) && subscribe.is_empty() {
                continue;
            }
            let versions = &self.versions[kind.index()];
            out.push(DeltaDiscoveryRequest {
                node: out.is_empty().then(|| self.node.unpack()),
                type_url: kind.type_url().to_string(),
                resource_names_subscribe: subscribe,
                initial_resource_versions: versions
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Default::default()
            });
        }
    }

    pub fn expects_change(&self) -> bool {
        self.tracker.expects_change()
    }

    pub fn is_synced(&self) -> bool {
        self.tracker.is_synced()
    }

    /// Handles one encoded response; pushes the requests to send onto `out`. A copy of a
    /// response already verified (same resources, names and versions; no removals) is
    /// recognised by its hash and not decoded; `Err` when the message is not a
    /// `DeltaDiscoveryResponse` at all.
    pub fn on_message(
        &mut self,
        msg: Bytes,
        out: &mut Vec<DeltaDiscoveryRequest>,
    ) -> Result<Outcome, prost::DecodeError> {
        let mut key = None;
        if let Some(head) = scan::head(&msg)
            && let Some(kind) = Kind::from_type_url(head.type_url).filter(|_| !head.removes)
        {
            let cache = &self.tracker.shared().verified;
            if let Some(verified) = cache.lookup(kind, head.key, head.bytes) {
                let snapshot = head.version.parse().ok();
                let nonce = head.nonce.to_owned();
                return Ok(self.accept(kind, nonce, &verified, &[], snapshot, out));
            }
            key = Some(head.key);
        }
        let resp = DeltaResponse::decode(msg)?;
        Ok(self.respond(resp, key, out))
    }

    /// Handles one decoded response (verified, never looked up: tests).
    pub fn on_response(
        &mut self,
        resp: DeltaResponse,
        out: &mut Vec<DeltaDiscoveryRequest>,
    ) -> Outcome {
        self.respond(resp, None, out)
    }

    /// Verifies `resp` (kept under `key` when it verifies), then ACKs or NACKs it.
    fn respond(
        &mut self,
        resp: DeltaResponse,
        key: Option<u128>,
        out: &mut Vec<DeltaDiscoveryRequest>,
    ) -> Outcome {
        let snapshot = resp.system_version_info.parse().ok();
        let nack = |type_url: String, nonce: String, e: DecodeError, out: &mut Vec<_>| {
            out.push(DeltaDiscoveryRequest {
                type_url,
                response_nonce: nonce,
                error_detail: Some(nack_status(&e)),
                ..Default::default()
            });
            Outcome {
                nack: Some(e),
                snapshot,
                ..Default::default()
            }
        };
        let Some(kind) = Kind::from_type_url(&resp.type_url) else {
            let e = DecodeError::UnknownType(resp.type_url.clone());
            return nack(resp.type_url, resp.nonce, e, out);
        };
        let shared = self.tracker.shared();
        let held = resp
            .resources
            .iter()
            .map(|r| (r.name.as_str().into(), r.version.as_str().into()))
            .collect();
        let verified = shared.verified.verify(
            kind,
            key,
            &shared.target.marker,
            resp.resources.iter().map(|r| {
                r.resource
                    .as_ref()
                    .ok_or_else(|| DecodeError::MissingBody(r.name.clone()))
            }),
            held,
        );
        match verified {
            Ok(v) => {
                let removed = &resp.removed_resources;
                self.accept(kind, resp.nonce, &v, removed, snapshot, out)
            }
            Err(e) => nack(resp.type_url, resp.nonce, e, out),
        }
    }

    /// Applies a verified response (upserts, and `removed`) and ACKs it, then changes
    /// the subscriptions of the next type if the names it references changed.
    fn accept(
        &mut self,
        kind: Kind,
        nonce: String,
        verified: &Verified,
        removed: &[String],
        snapshot: Option<u64>,
        out: &mut Vec<DeltaDiscoveryRequest>,
    ) -> Outcome {
        let versions = &mut self.versions[kind.index()];
        *versions = if removed.is_empty() {
            verified.versions.get_or(versions, || {
                Arc::new(with_upserts(versions, &verified.held, &[]))
            })
        } else {
            Arc::new(with_upserts(versions, &verified.held, removed))
        };
        let applied = self.tracker.apply(kind, verified, removed, false);
        out.push(DeltaDiscoveryRequest {
            type_url: kind.type_url().to_string(),
            response_nonce: nonce,
            ..Default::default()
        });
        if let Some(old) = applied.children_changed {
            let next = match kind {
                Kind::Cluster => Kind::Endpoint,
                _ => Kind::Route,
            };
            let (subscribe, unsubscribe) = diff(&old, self.tracker.parents(kind));
            let versions = &mut self.versions[next.index()];
            if unsubscribe
                .iter()
                .any(|n| versions.contains_key(n.as_str()))
            {
                *versions = Arc::new(with_upserts(versions, &[], &unsubscribe));
            }
            out.push(DeltaDiscoveryRequest {
                type_url: next.type_url().to_string(),
                resource_names_subscribe: subscribe,
                resource_names_unsubscribe: unsubscribe,
                ..Default::default()
            });
        }
        let (synced, converged) = self.tracker.settle(verified.marked);
        Outcome {
            nack: None,
            synced,
            converged,
            snapshot,
        }
    }
}

/// `versions` with `upserts` (name, version) applied and `removed` names gone.
fn with_upserts(
    versions: &Versions,
    upserts: &[(Box<str>, Box<str>)],
    removed: &[String],
) -> Versions {
    let mut next = versions.clone();
    next.extend(upserts.iter().cloned());
    for name in removed {
        next.remove(name.as_str());
    }
    next
}

/// `(added, removed)` children between two indexes (both sorted).
fn diff(old: &DepIndex, new: &DepIndex) -> (Vec<String>, Vec<String>) {
    let (a, b) = (old.children(), new.children());
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let ord = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => Ordering::Less,
            _ => Ordering::Greater,
        };
        match ord {
            Ordering::Less => {
                removed.push(String::from(&*a[i]));
                i += 1;
            }
            Ordering::Greater => {
                added.push(String::from(&*b[j]));
                j += 1;
            }
            Ordering::Equal => {
                i += 1;
                j += 1;
            }
        }
    }
    (added, removed)
}
