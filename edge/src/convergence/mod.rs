//! Per-revision convergence on this edge (`/debug/push_status`): for each of the latest
//! config revisions pushed, how many proxies it concerned, how many were sent it, ACKed
//! it, NACKed it (with Envoy's words), or left before answering.
//!
//! ```text
//!  dispatch(V) ──► Ledger::dispatched(V, concerned)      one entry per snapshot version
//!      │ a Revisions token per concerned proxy, merged in its push queue entry
//!      ▼
//!  stream task: sent ──► InFlight (the nonces sent) ──► ACK / NACK ──► Ledger
//!  a token dropped unsettled (stream gone, queue closed) ──► counted `gone`
//! ```
//!
//! A snapshot's version is the config revision it reflects, so the revision a user asks
//! about is answered by the first version this edge pushed at or after it.

mod ledger;
mod revisions;
mod stream;

pub use ledger::{Ledger, NackSample, PushStatus, RevisionCounts, RevisionState};
pub use revisions::Revisions;
pub use stream::InFlight;

#[cfg(test)]
mod tests;
