use crate::change::ChangeSet;
use crate::config::Config;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// W3C trace context (`traceparent`, `tracestate`) carried in message headers.
pub type TraceContext = BTreeMap<String, String>;

/// Published on `shoal.snapshot` once a snapshot is written and `latest` advanced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotEvent {
    /// The config revision the snapshot reflects.
    pub version: u64,
    /// The snapshot `changes` are relative to (the writing builder's previous build; 0:
    /// none). An edge holding exactly `base` applies `changes` as they are; any other
    /// edge (another builder wrote in between, or it missed an announcement) diffs the
    /// chunks it holds against the new ones itself.
    pub base: u64,
    /// What changed since `base`: services by key, routing by hostname; empty keys with
    /// `full` mean everything. Its start is the earliest change included (convergence
    /// time) and its trace that of the push request that caused it.
    pub changes: ChangeSet,
}

/// Config KV values are JSON: self-describing, readable with `nats kv get`.
pub fn encode_config(config: &Config) -> Result<Vec<u8>, super::TransportError> {
    serde_json::to_vec(config).map_err(|e| super::TransportError::Codec(e.to_string()))
}

pub fn decode_config(bytes: &[u8]) -> Result<Config, super::TransportError> {
    serde_json::from_slice(bytes).map_err(|e| super::TransportError::Codec(e.to_string()))
}
