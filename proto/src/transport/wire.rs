use crate::config::{Config, ConfigKey};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// W3C trace context (`traceparent`, `tracestate`) carried in message headers.
pub type TraceContext = BTreeMap<String, String>;

/// A message with the trace context it travels with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Traced<T> {
    pub value: T,
    pub trace: TraceContext,
}

impl<T> Traced<T> {
    pub fn new(value: T) -> Self {
        Self {
            value,
            trace: TraceContext::new(),
        }
    }
}

/// Published on `shoal.snapshot` once a snapshot is written and `latest` advanced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotEvent {
    /// The config revision the snapshot reflects.
    pub version: u64,
    /// False when only endpoints changed.
    pub full: bool,
    /// What changed since the previous snapshot; empty = everything. Endpoint and service
    /// changes are named as `ServiceEntry <namespace>/<hostname>`, Istio's convention.
    pub configs_updated: BTreeSet<ConfigKey>,
    /// Start of the earliest change this snapshot includes (Unix nanoseconds), for
    /// convergence time.
    pub start_unix_nanos: u64,
}

/// Config KV values are JSON: self-describing, readable with `nats kv get`.
pub fn encode_config(config: &Config) -> Result<Vec<u8>, super::TransportError> {
    serde_json::to_vec(config).map_err(|e| super::TransportError::Codec(e.to_string()))
}

pub fn decode_config(bytes: &[u8]) -> Result<Config, super::TransportError> {
    serde_json::from_slice(bytes).map_err(|e| super::TransportError::Codec(e.to_string()))
}
