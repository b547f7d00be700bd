//! `PushRequest`: what changed, and whether proxies need a full push or only EDS.

use crate::config::{ConfigKey, Kind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Why a push was triggered (Istio's `TriggerReason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TriggerReason {
    EndpointUpdate,
    ConfigUpdate,
    ServiceUpdate,
    ProxyRequest,
    GlobalUpdate,
    Unknown,
}

impl TriggerReason {
    pub fn for_kind(kind: Kind) -> Self {
        match kind {
            k if k.is_endpoint_only() => TriggerReason::EndpointUpdate,
            Kind::Service | Kind::ServiceEntry => TriggerReason::ServiceUpdate,
            Kind::Namespace => TriggerReason::GlobalUpdate,
            _ => TriggerReason::ConfigUpdate,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TriggerReason::EndpointUpdate => "endpoint",
            TriggerReason::ConfigUpdate => "config",
            TriggerReason::ServiceUpdate => "service",
            TriggerReason::ProxyRequest => "proxyrequest",
            TriggerReason::GlobalUpdate => "global",
            TriggerReason::Unknown => "unknown",
        }
    }
}

impl fmt::Display for TriggerReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request to push, as ingest publishes it on `shoal.push`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushRequest {
    /// A full push recomputes everything; otherwise only endpoints (EDS) changed.
    pub full: bool,
    /// What changed; empty means everything.
    pub configs_updated: BTreeSet<ConfigKey>,
    /// Every event merged into this request, in order (not deduplicated, for counting).
    pub reasons: Vec<TriggerReason>,
    /// When the first event merged into this request happened, in Unix nanoseconds.
    pub start_unix_nanos: u64,
    /// The config revision this request covers: builders read at least this revision.
    pub revision: u64,
}

impl PushRequest {
    /// The request one config event makes: full unless the kind only moves endpoints.
    pub fn for_change(key: ConfigKey, revision: u64, at: SystemTime) -> Self {
        let kind = key.kind;
        Self {
            full: !kind.is_endpoint_only(),
            configs_updated: BTreeSet::from([key]),
            reasons: vec![TriggerReason::for_kind(kind)],
            start_unix_nanos: unix_nanos(at),
            revision,
        }
    }

    /// A full push of everything (start-up, resync).
    pub fn full_everything(reason: TriggerReason, revision: u64, at: SystemTime) -> Self {
        Self {
            full: true,
            configs_updated: BTreeSet::new(),
            reasons: vec![reason],
            start_unix_nanos: unix_nanos(at),
            revision,
        }
    }

    /// Istio's `PushRequest.Merge`: earliest start, `full = a || b`, reasons appended, and
    /// `configs_updated` unioned only when both are non-empty (empty means everything).
    pub fn merge(mut self, other: PushRequest) -> PushRequest {
        self.start_unix_nanos = self.start_unix_nanos.min(other.start_unix_nanos);
        self.full |= other.full;
        self.reasons.extend(other.reasons);
        self.revision = self.revision.max(other.revision);
        if self.configs_updated.is_empty() || other.configs_updated.is_empty() {
            self.configs_updated.clear();
        } else {
            self.configs_updated.extend(other.configs_updated);
        }
        self
    }

    pub fn start(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(self.start_unix_nanos)
    }

    /// True when `configs_updated` names only endpoint-bearing kinds.
    pub fn is_endpoint_only(&self) -> bool {
        !self.full
    }
}

pub fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(full: bool, keys: &[&str], start: u64, rev: u64) -> PushRequest {
        PushRequest {
            full,
            configs_updated: keys
                .iter()
                .map(|n| ConfigKey::new(Kind::VirtualService, "default", *n))
                .collect(),
            reasons: vec![if full {
                TriggerReason::ConfigUpdate
            } else {
                TriggerReason::EndpointUpdate
            }],
            start_unix_nanos: start,
            revision: rev,
        }
    }

    #[test]
    fn merge_keeps_earliest_start_and_latest_revision() {
        let m = req(false, &["a"], 20, 5).merge(req(false, &["b"], 10, 3));
        assert_eq!(m.start_unix_nanos, 10);
        assert_eq!(m.revision, 5);
    }

    #[test]
    fn merge_full_is_or() {
        assert!(req(true, &["a"], 1, 1).merge(req(false, &["b"], 1, 1)).full);
        assert!(req(false, &["a"], 1, 1).merge(req(true, &["b"], 1, 1)).full);
        assert!(
            !req(false, &["a"], 1, 1)
                .merge(req(false, &["b"], 1, 1))
                .full
        );
    }

    #[test]
    fn merge_appends_reasons_without_dedup() {
        let m = req(true, &["a"], 1, 1)
            .merge(req(true, &["b"], 1, 1))
            .merge(req(false, &["c"], 1, 1));
        assert_eq!(
            m.reasons,
            vec![
                TriggerReason::ConfigUpdate,
                TriggerReason::ConfigUpdate,
                TriggerReason::EndpointUpdate
            ]
        );
    }

    #[test]
    fn merge_unions_configs_when_both_non_empty() {
        let m = req(true, &["a"], 1, 1).merge(req(true, &["b", "a"], 1, 1));
        let names: Vec<_> = m.configs_updated.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn merge_with_empty_configs_means_everything() {
        let m = req(true, &["a"], 1, 1).merge(req(true, &[], 1, 1));
        assert!(m.configs_updated.is_empty());
        let m = req(true, &[], 1, 1).merge(req(true, &["a"], 1, 1));
        assert!(m.configs_updated.is_empty());
    }

    #[test]
    fn endpoint_kinds_are_not_full() {
        let now = SystemTime::now();
        let eds = PushRequest::for_change(ConfigKey::new(Kind::EndpointSlice, "ns", "s"), 1, now);
        assert!(!eds.full);
        let vs = PushRequest::for_change(ConfigKey::new(Kind::VirtualService, "ns", "v"), 1, now);
        assert!(vs.full);
    }
}
