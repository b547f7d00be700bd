//! The ADS server: SotW and Delta streams, each a state machine without I/O, fed by the
//! proxy's requests and by pushes from the dispatcher.
//!
//! ```text
//!  SnapshotUpdate ──► dispatcher ──(scope depends on it?)──► PushQueue ──► throttle ──┐
//!                                                                                    ▼
//!  proxy ──requests──► transport ──► stream task: SotwStream / DeltaStream ◄── PushJob
//!        ◄─responses── bounded channel of encoded responses ◄── (send timeout) ◄──────┘
//! ```
//!
//! Imports run one way, down this picture (a module uses only those below it):
//!
//! ```text
//!  server, handoff, dispatch          XdsServer: wiring, drain, hand-off, pushes
//!  service                            the gRPC service: admits a stream, routes it
//!  connection                         the stream task: serves, or relays, one stream
//!  body                               a stream's response body: served or relayed
//!  relay                              passes a stream's frames to and from its owner
//!  shared                             what every task shares (config, registry, ...)
//!  registry   ownership               connected streams │ ring view, relays, channels
//!  protocol                           SotW / Delta behind one trait
//!  sotw, delta ─► sent, status, source, scope, limits, by_type, error
//!  transport, outbound                the wire: framing, encoded responses, gRPC paths,
//!                                     relay headers; the response body
//! ```

mod body;
mod by_type;
mod config;
mod connection;
pub mod delta;
mod dispatch;
pub mod error;
mod handoff;
mod limits;
mod metrics;
mod outbound;
mod ownership;
mod protocol;
mod registry;
mod relay;
pub mod scope;
mod sent;
mod server;
mod service;
mod shared;
pub mod sotw;
pub mod source;
pub mod status;
mod transport;
pub mod tunnel;

pub use body::AdsBody;
pub use config::XdsConfig;
pub use delta::DeltaStream;
#[doc(hidden)]
pub use dispatch::DecisionBench;
pub use dispatch::proxy_needs_push;
pub use error::AdsError;
pub use limits::DEFAULT_MAX_NAMES;
pub use outbound::Outbound;
pub use scope::PushScope;
pub use server::{AdsService, ConfigDumpError, XdsServer};
pub use sotw::SotwStream;
pub use source::{GeneratorSource, ResourceSource};
pub use status::{Nack, Reply, RequestKind, TypeStatus};
pub use transport::{SotwRequest, SotwRequestFields};

/// The request decoder and the connection prelude, for the fuzz targets in `fuzz/`
/// (feature `fuzzing`).
#[cfg(feature = "fuzzing")]
pub use transport::fuzzing;

#[cfg(test)]
mod testing;
