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
//! (interned per scope) and bitsets, never decoded resources.

pub mod decode;
mod delta;
pub mod index;
mod sotw;
mod tracker;

#[cfg(test)]
mod tests;

pub use decode::{DecodeError, Kind, Marker};
pub use delta::DeltaClient;
pub use sotw::SotwClient;

use bytes::Bytes;
use decode::Summary;
use envoy_types::pb::google::rpc::Status;
use index::{DepIndex, Interner};
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
    empty: Arc<DepIndex>,
}

impl Shared {
    pub fn new(target: Target) -> Arc<Self> {
        Arc::new(Shared {
            target,
            interner: Interner::default(),
            empty: Arc::new(DepIndex::default()),
        })
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
}

/// The google.rpc.Status of a NACK.
fn nack_status(e: &DecodeError) -> Status {
    Status {
        code: tonic::Code::InvalidArgument as i32,
        message: e.to_string(),
        details: Vec::new(),
    }
}

/// Decodes every resource of a response of `kind`; `(summaries, any marked)`.
fn decode_all(
    kind: Kind,
    marker: &Marker,
    resources: impl Iterator<Item = Result<(Bytes, Bytes), DecodeError>>,
) -> Result<(Vec<Summary>, bool), DecodeError> {
    let mut out = Vec::with_capacity(resources.size_hint().0);
    let mut marked = false;
    for r in resources {
        let (type_url, value) = r?;
        if type_url != kind.type_url().as_bytes() {
            return Err(DecodeError::TypeMismatch {
                expected: kind.type_url(),
                found: String::from_utf8_lossy(&type_url).into_owned(),
            });
        }
        let s = decode::decode(kind, value, marker)?;
        marked |= s.marked;
        out.push(s);
    }
    Ok((out, marked))
}
