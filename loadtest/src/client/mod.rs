//! A simulated proxy's ADS client as a state machine without I/O: a response in, the
//! requests Envoy would send back out (ACK or NACK, then subscriptions for the names the
//! response references), and what happened (synced, converged, NACKed).
//!
//! ```text
//!  start ─► CDS *, LDS *                      (node on the first request)
//!  CDS response ─► decode every Cluster ─► ACK ─► EDS for the EDS clusters' service names
//!  LDS response ─► decode Listeners + HCMs ─► ACK ─► RDS for the HCMs' route names
//!  EDS/RDS response ─► decode ─► ACK (marks names received; looks for the change)
//!  a resource that does not decode ─► NACK (error_detail), state unchanged
//! ```
//! [`SotwClient`] and [`DeltaClient`] share [`tracker`]'s bookkeeping; a proxy keeps names
//! (interned per scope) and bitsets, never decoded resources. Each distinct response is
//! decoded once per run ([`verified`]): a copy is recognised by the hash of its encoded
//! resources ([`crate::wire::scan`]) and only applied, with what its first copy yielded.

pub mod decode;
mod delta;
pub mod index;
mod sotw;
mod tracker;
pub mod verified;

#[cfg(test)]
mod tests;

pub use decode::{DecodeError, Kind, Marker};
pub use delta::DeltaClient;
pub use sotw::SotwClient;
pub use verified::{CacheReport, Verified, VerifyCache};

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::rpc::Status;
use index::{DepIndex, Interner};
use prost::Message;
use std::sync::Arc;

/// Which proxies should receive the change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Expect {
    #[default]
    Nobody,
    /// Proxies whose clusters include this one (a routing change).
    Cluster(String),
    /// Proxies subscribed to this EDS name (an endpoint change).
    EdsName(String),
}

/// The change being measured, and who should get it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Target {
    pub marker: Marker,
    pub expect: Expect,
}

/// What every simulated proxy of a run shares.
#[derive(Debug)]
pub struct Shared {
    pub target: Target,
    pub interner: Interner,
    /// Responses already decoded and verified, by content.
    pub verified: VerifyCache,
    empty: Arc<DepIndex>,
    /// Where every Delta proxy's versions start, so that equal histories share theirs.
    empty_versions: Arc<verified::Versions>,
}

impl Shared {
    pub fn new(target: Target) -> Arc<Self> {
        Shared::with_cache(target, verified::DEFAULT_CAPACITY)
    }

    /// Shared state whose cache of verified responses holds about `capacity` (0: none).
    pub fn with_cache(target: Target, capacity: usize) -> Arc<Self> {
        Arc::new(Shared {
            target,
            interner: Interner::default(),
            verified: VerifyCache::new(capacity),
            empty: Arc::new(DepIndex::default()),
            empty_versions: Arc::default(),
        })
    }
}

/// A proxy's node, kept encoded between the streams that send it (a quarter of the
/// decoded `Node`'s heap: its metadata maps are rebuilt only when a stream starts).
#[derive(Clone, Debug)]
pub(crate) struct PackedNode(bytes::Bytes);

impl PackedNode {
    pub fn new(node: &Node) -> Self {
        PackedNode(node.encode_to_vec().into())
    }

    pub fn unpack(&self) -> Node {
        // Bytes this type encoded from a `Node`: they decode.
        Node::decode(self.0.clone()).unwrap_or_default()
    }
}

/// What one response did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// It was NACKed, and why.
    pub nack: Option<DecodeError>,
    /// It completed the proxy's initial config (once per client).
    pub synced: bool,
    /// It carried the change and was ACKed (once per client).
    pub converged: bool,
    /// Its snapshot version (the edge's `version_info`), if it is one.
    pub snapshot: Option<u64>,
}

/// The google.rpc.Status of a NACK.
fn nack_status(e: &DecodeError) -> Status {
    Status {
        code: tonic::Code::InvalidArgument as i32,
        message: e.to_string(),
        details: Vec::new(),
    }
}
