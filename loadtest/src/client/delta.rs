//! An incremental (Delta) ADS client: ACKs carry only the nonce; subscriptions change by
//! `resource_names_subscribe`/`unsubscribe`; responses carry upserts and removals.

use super::decode::{DecodeError, Kind};
use super::index::DepIndex;
use super::tracker::Tracker;
use super::{Outcome, Shared, decode_all, nack_status};
use crate::wire::DeltaResponse;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Debug)]
pub struct DeltaClient {
    tracker: Tracker,
    node: Node,
    /// Per type, the version of every resource held: `initial_resource_versions` on a
    /// reconnect, so the new server sends only what differs.
    versions: [HashMap<String, String>; 4],
}

impl DeltaClient {
    pub fn new(shared: Arc<Shared>, node: Node) -> Self {
        DeltaClient {
            tracker: Tracker::new(shared),
            node,
            versions: Default::default(),
        }
    }

    /// The first requests of a stream: CDS and LDS wildcard (no names), the node on the
    /// first; on a reconnect, with `initial_resource_versions` of everything held, and EDS
    /// and RDS subscriptions for the names already known.
    pub fn start(&mut self, out: &mut Vec<DeltaDiscoveryRequest>) {
        for kind in [Kind::Cluster, Kind::Listener, Kind::Endpoint, Kind::Route] {
            let subscribe: Vec<String> = match self.tracker.names_for(kind) {
                Some(index) => index.children().iter().map(|n| n.to_string()).collect(),
                None => Vec::new(),
            };
            if matches!(kind, Kind::Endpoint | Kind::Route) && subscribe.is_empty() {
                continue;
            }
            let versions = &self.versions[kind.index()];
            out.push(DeltaDiscoveryRequest {
                node: out.is_empty().then(|| self.node.clone()),
                type_url: kind.type_url().to_string(),
                resource_names_subscribe: subscribe,
                initial_resource_versions: versions
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                ..Default::default()
            });
        }
    }

    /// The snapshot version of `system_version_info` (the edge's), if it is one.
    pub fn snapshot_version(resp: &DeltaResponse) -> Option<u64> {
        resp.system_version_info.parse().ok()
    }

    pub fn expects_change(&self) -> bool {
        self.tracker.expects_change()
    }

    pub fn is_synced(&self) -> bool {
        self.tracker.is_synced()
    }

    /// Handles one response; pushes the requests to send onto `out`.
    pub fn on_response(
        &mut self,
        resp: DeltaResponse,
        out: &mut Vec<DeltaDiscoveryRequest>,
    ) -> Outcome {
        let nack = |type_url: String, nonce: String, e: DecodeError, out: &mut Vec<_>| {
            out.push(DeltaDiscoveryRequest {
                type_url,
                response_nonce: nonce,
                error_detail: Some(nack_status(&e)),
                ..Default::default()
            });
            Outcome {
                nack: Some(e),
                ..Default::default()
            }
        };
        let Some(kind) = Kind::from_type_url(&resp.type_url) else {
            let e = DecodeError::UnknownType(resp.type_url.clone());
            return nack(resp.type_url, resp.nonce, e, out);
        };
        let marker = &self.tracker.shared().target.marker;
        let held: Vec<(String, String)> = resp
            .resources
            .iter()
            .map(|r| (r.name.clone(), r.version.clone()))
            .collect();
        let decoded = decode_all(
            kind,
            marker,
            resp.resources.into_iter().map(|r| match r.resource {
                Some(a) => Ok((a.type_url, a.value)),
                None => Err(DecodeError::MissingBody(r.name)),
            }),
        );
        let (summaries, marked) = match decoded {
            Ok(d) => d,
            Err(e) => return nack(resp.type_url, resp.nonce, e, out),
        };
        let versions = &mut self.versions[kind.index()];
        versions.extend(held);
        for name in &resp.removed_resources {
            versions.remove(name);
        }
        let applied = self
            .tracker
            .apply(kind, summaries, &resp.removed_resources, false);
        out.push(DeltaDiscoveryRequest {
            type_url: resp.type_url,
            response_nonce: resp.nonce,
            ..Default::default()
        });
        if let Some(old) = applied.children_changed {
            let next = match kind {
                Kind::Cluster => Kind::Endpoint,
                _ => Kind::Route,
            };
            let (subscribe, unsubscribe) = diff(&old, self.tracker.parents(kind));
            let versions = &mut self.versions[next.index()];
            for name in &unsubscribe {
                versions.remove(name);
            }
            out.push(DeltaDiscoveryRequest {
                type_url: next.type_url().to_string(),
                resource_names_subscribe: subscribe,
                resource_names_unsubscribe: unsubscribe,
                ..Default::default()
            });
        }
        let (synced, converged) = self.tracker.settle(marked);
        Outcome {
            nack: None,
            synced,
            converged,
        }
    }
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
                removed.push(a[i].to_string());
                i += 1;
            }
            Ordering::Greater => {
                added.push(b[j].to_string());
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
