//! What differs, per type, between the config a proxy acknowledged and what the edge
//! would send it now: Istio's `proxy-status <pod>` diff, from the edge's side.

use super::Held;
use super::dump::resource_or_reason;
use crate::xds::XdsResource;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One type's comparison.
#[derive(Debug, Serialize)]
pub struct TypeDiff {
    pub type_url: String,
    /// The version the proxy acknowledged, and the snapshot the edge generated from.
    pub acked_version: String,
    pub edge_version: u64,
    /// Nothing differs.
    pub matches: bool,
    /// Resources that differ, by name, each side as Envoy's JSON (`None`: absent there).
    pub resources: Vec<ResourceDiff>,
}

#[derive(Debug, Serialize)]
pub struct ResourceDiff {
    pub name: String,
    pub acked: Option<Value>,
    pub edge: Option<Value>,
}

/// `held` against `now` (what the edge generates for the same subscription at snapshot
/// `edge_version`). Resources are compared by content hash; only those that differ are
/// written out.
pub fn config_diff(held: &Held<'_>, now: &[Arc<XdsResource>], edge_version: u64) -> TypeDiff {
    let mut by_name: BTreeMap<&str, (Option<&XdsResource>, Option<&XdsResource>)> = BTreeMap::new();
    for r in held.resources {
        by_name.entry(&r.name).or_default().0 = Some(r);
    }
    for r in now {
        by_name.entry(&r.name).or_default().1 = Some(r);
    }
    let resources: Vec<ResourceDiff> = by_name
        .into_iter()
        .filter(|(_, (a, e))| a.map(|r| r.hash) != e.map(|r| r.hash))
        .map(|(name, (acked, edge))| ResourceDiff {
            name: name.to_string(),
            acked: acked.map(resource_or_reason),
            edge: edge.map(resource_or_reason),
        })
        .collect();
    TypeDiff {
        type_url: held.type_url.to_string(),
        acked_version: held.version.to_string(),
        edge_version,
        matches: resources.is_empty(),
        resources,
    }
}
