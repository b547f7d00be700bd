//! The ADS wire, below tonic's codecs: what moves between HTTP/2 and the stream tasks,
//! without keeping a buffer per stream. It knows nothing of streams, sessions or relays
//! (the gRPC service in `ads/service.rs` does), so every other ADS module may use it.
//!
//! ```text
//!  DATA chunks ──► Inbound: Deframer ──► prost decode ──► stream task (state machine)
//!                  (a message is a slice of its chunk; a split one is gathered in a
//!                   buffer of its exact size, gone with the message)
//!  stream task ──► encode: one exact-size Bytes (prefix + protobuf) ──► bounded channel
//!              ──► Outbound body: a DATA chunk per response, then grpc-status trailers
//! ```
//!
//! tonic's codec path would keep, per stream, an encode buffer as large as the largest
//! response ever sent (a CDS response is ~100 KB) and a decode buffer as large as the
//! largest request.

mod encode;
mod framing;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod inbound;
pub(crate) mod peer;
pub(crate) mod prelude;
pub(crate) mod relay_header;
mod request;

pub(crate) use encode::frame;
pub use encode::{
    DeltaResource, DeltaResponse, Encoded, SotwResponse, delta_resources, sotw_resources,
};
pub(crate) use inbound::{Inbound, RequestStream};
pub use request::{SotwRequest, SotwRequestFields};

/// The gRPC service name.
pub const SERVICE: &str = "envoy.service.discovery.v3.AggregatedDiscoveryService";
/// The state-of-the-world method's path.
pub const SOTW_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
/// The incremental method's path.
pub const DELTA_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

#[cfg(test)]
pub(crate) mod tests;
