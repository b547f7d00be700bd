//! The ADS wire, below tonic's codecs: gRPC length-prefixed framing, a scan of a response
//! that reads its strings and hashes its resources without decoding it, and views of the
//! responses whose resource bodies stay slices of the received bytes (no copy before each
//! resource is decoded into its Envoy type).

pub mod framing;
pub mod scan;
mod views;

pub use views::{DeltaResource, DeltaResponse, RawAny, SotwResponse};

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;

/// gRPC paths of the two ADS methods.
pub const SOTW_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
pub const DELTA_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

/// `msg` as one uncompressed gRPC message (flag byte, big-endian length, bytes).
pub fn grpc_frame(msg: &impl Message) -> Bytes {
    let len = msg.encoded_len();
    let mut buf = BytesMut::with_capacity(framing::HEADER_LEN + len);
    buf.put_u8(0);
    buf.put_u32(len as u32);
    // Cannot fail: the buffer has room for `encoded_len` bytes.
    let _ = msg.encode(&mut buf);
    buf.freeze()
}
