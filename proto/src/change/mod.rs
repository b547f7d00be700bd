//! What changed: the one change type every hop carries (ingest → builder → edge → push
//! queue), and Istio's `PushRequest.Merge` over it.
//!
//! Each hop decides its change set once and hands it on; the next hop merges what it
//! receives and never re-derives it from scratch:
//!
//! ```text
//!  ingest:  one ChangeSet per KV write (config keys) ──merge (debounce)──► shoal.push
//!  builder: merged requests + its replica's log ──► build ──► ChangeSet of the snapshot
//!           (services by key, routing by hostname) ──► shoal.snapshot {version, base}
//!  edge:    the announced ChangeSet when it holds `base` (else its own chunk diff)
//!           ──► push queue (merged per connection)
//! ```

mod namespace;

pub use namespace::{namespace_changes, routing_changes, service_changes};

use crate::config::{ConfigKey, Kind};
use crate::model::ServiceKey;
use crate::transport::TraceContext;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
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
            Kind::Namespace | Kind::MeshConfig => TriggerReason::GlobalUpdate,
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

/// One changed thing, typed by what it is to the mesh.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ChangeKey {
    /// A config object as its registry names it (a VirtualService, a Sidecar, an
    /// EndpointSlice...).
    Config(ConfigKey),
    /// A service's definition or endpoints (Istio's `ServiceEntry <ns>/<hostname>`).
    Service(ServiceKey),
    /// Routing for a hostname (a VirtualService or DestinationRule naming it) changed.
    Host(String),
}

impl ChangeKey {
    pub fn service(namespace: impl Into<String>, hostname: impl Into<String>) -> Self {
        ChangeKey::Service(ServiceKey {
            hostname: hostname.into(),
            namespace: namespace.into(),
        })
    }

    /// The hostname this key concerns, when it names one.
    pub fn hostname(&self) -> Option<&str> {
        match self {
            ChangeKey::Service(s) => Some(&s.hostname),
            ChangeKey::Host(h) => Some(h),
            ChangeKey::Config(_) => None,
        }
    }
}

impl From<ConfigKey> for ChangeKey {
    fn from(key: ConfigKey) -> Self {
        ChangeKey::Config(key)
    }
}

impl fmt::Display for ChangeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChangeKey::Config(k) => write!(f, "{k}"),
            ChangeKey::Service(s) => write!(f, "ServiceEntry {s}"),
            ChangeKey::Host(h) => write!(f, "host {h}"),
        }
    }
}

/// What changed, why, since when, and the trace it belongs to (Istio's `PushRequest`
/// less the push context).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeSet {
    /// A full push recomputes everything; otherwise only endpoints (EDS) changed.
    pub full: bool,
    /// What changed; empty means everything.
    pub keys: BTreeSet<ChangeKey>,
    /// How many events of each reason were merged in (Istio's `ReasonStats`): bounded by
    /// the number of reasons however many events merge.
    pub reasons: BTreeMap<TriggerReason, u64>,
    /// When the earliest event merged in happened, in Unix nanoseconds.
    pub start_unix_nanos: u64,
    /// W3C trace context of the earliest traced event. Travels in message headers, not
    /// in the payload.
    #[serde(skip)]
    pub trace: TraceContext,
    /// The traces of the other traced events merged in (at most [`MAX_LINKED_TRACES`]):
    /// the debounced push's span links to each, so every change's trace leads to the push
    /// that carried it. Not sent on: the push's own trace carries the change onwards.
    #[serde(skip)]
    pub linked: Vec<TraceContext>,
    /// Traced events merged in beyond [`MAX_LINKED_TRACES`] (counted on the span).
    #[serde(skip)]
    pub linked_dropped: u64,
}

/// The most traces one merged change links to: a storm of events makes one push, whose
/// span should not hold a link per event.
pub const MAX_LINKED_TRACES: usize = 32;

impl ChangeSet {
    /// The change one config event makes: full unless the kind only moves endpoints.
    pub fn for_config(key: ConfigKey, at: SystemTime) -> Self {
        let kind = key.kind;
        Self {
            full: !kind.is_endpoint_only(),
            keys: BTreeSet::from([ChangeKey::Config(key)]),
            reasons: BTreeMap::from([(TriggerReason::for_kind(kind), 1)]),
            start_unix_nanos: unix_nanos(at),
            trace: TraceContext::new(),
            linked: Vec::new(),
            linked_dropped: 0,
        }
    }

    /// A full change of everything (start-up, resync).
    pub fn everything(reason: TriggerReason, at: SystemTime) -> Self {
        Self {
            full: true,
            keys: BTreeSet::new(),
            reasons: BTreeMap::from([(reason, 1)]),
            start_unix_nanos: unix_nanos(at),
            trace: TraceContext::new(),
            linked: Vec::new(),
            linked_dropped: 0,
        }
    }

    /// A change of the given keys.
    pub fn of(
        full: bool,
        keys: BTreeSet<ChangeKey>,
        reason: TriggerReason,
        at: SystemTime,
    ) -> Self {
        Self {
            full,
            keys,
            reasons: BTreeMap::from([(reason, 1)]),
            start_unix_nanos: unix_nanos(at),
            trace: TraceContext::new(),
            linked: Vec::new(),
            linked_dropped: 0,
        }
    }

    /// Istio's `PushRequest.Merge`: earliest start, `full = a || b`, reason counts added,
    /// and keys unioned only when both are non-empty (empty means everything). The trace
    /// of the earlier change is kept (the later one's when the earlier has none), the
    /// other is linked.
    pub fn merge(mut self, mut other: ChangeSet) -> ChangeSet {
        let other_first = other.start_unix_nanos < self.start_unix_nanos;
        let displaced = if self.trace.is_empty() || (other_first && !other.trace.is_empty()) {
            std::mem::replace(&mut self.trace, std::mem::take(&mut other.trace))
        } else {
            std::mem::take(&mut other.trace)
        };
        self.link(displaced);
        for trace in std::mem::take(&mut other.linked) {
            self.link(trace);
        }
        self.linked_dropped += other.linked_dropped;
        self.start_unix_nanos = self.start_unix_nanos.min(other.start_unix_nanos);
        self.full |= other.full;
        for (reason, n) in other.reasons {
            *self.reasons.entry(reason).or_default() += n;
        }
        if self.keys.is_empty() || other.keys.is_empty() {
            self.keys.clear();
        } else {
            self.keys.extend(other.keys);
        }
        self
    }

    /// Links `trace` (if any), or counts it dropped beyond [`MAX_LINKED_TRACES`].
    fn link(&mut self, trace: TraceContext) {
        if trace.is_empty() {
            return;
        }
        if self.linked.len() < MAX_LINKED_TRACES {
            self.linked.push(trace);
        } else {
            self.linked_dropped += 1;
        }
    }

    /// Whether this change concerns everything (no keys to narrow it).
    pub fn is_everything(&self) -> bool {
        self.keys.is_empty()
    }

    /// How many events were merged in.
    pub fn events(&self) -> u64 {
        self.reasons.values().sum()
    }

    pub fn start(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(self.start_unix_nanos)
    }

    /// The config keys named (for the builder: which objects moved).
    pub fn config_keys(&self) -> impl Iterator<Item = &ConfigKey> {
        self.keys.iter().filter_map(|k| match k {
            ChangeKey::Config(c) => Some(c),
            _ => None,
        })
    }
}

pub fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
