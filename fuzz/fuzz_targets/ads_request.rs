//! Arbitrary bytes as an ADS request body: cut into HTTP/2 DATA chunks, through the edge's
//! gRPC deframer and prost decoding of `SotwRequest` (Envoy's `DiscoveryRequest`, names
//! left as bytes) and `DeltaDiscoveryRequest` (`edge/src/ads/transport/{framing,inbound,
//! request}.rs`), as a stream task reads them.
//!
//! The first byte chooses the chunk cuts and the request limit, so the split-message
//! path, truncation and the size limit are all reached; the rest is the body. Whatever
//! the bytes, the decoder must answer with requests or a status, hold no more than the
//! chunk it reads plus one request, and say the same thing however the body is cut. Each
//! request's `Node` is then read as a stream's first request is (`proxy::from_node`).

#![no_main]

use bytes::Bytes;
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use libfuzzer_sys::fuzz_target;
use shoal_edge::ads::SotwRequest;
use shoal_edge::ads::fuzzing::decode_requests;
use shoal_edge::proxy::from_node;

/// Cuts `body` into chunks of `size` bytes (0: one chunk).
fn chunks(body: &[u8], size: usize) -> Vec<Bytes> {
    if size == 0 {
        return vec![Bytes::copy_from_slice(body)];
    }
    body.chunks(size).map(Bytes::copy_from_slice).collect()
}

/// What a body decodes to, comparable across cuts.
fn outcome<T: prost::Message + Default>(
    body: &[u8],
    size: usize,
    max: usize,
) -> Vec<Result<T, (tonic::Code, String)>> {
    decode_requests::<T>(chunks(body, size), max)
        .into_iter()
        .map(|r| r.map_err(|s| (s.code(), s.message().to_string())))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, body)) = data.split_first() else {
        return;
    };
    let size = [0, 1, 3, 5, 7, 64, 1024, 16_384][usize::from(control & 7)];
    let max = [16, 256, 4096, 4 * 1024 * 1024][usize::from(control >> 3 & 3)];
    let whole = outcome::<SotwRequest>(body, 0, max);
    for req in whole.iter().flatten() {
        let _ = from_node(req.node.as_ref(), Default::default());
    }
    let cut = outcome::<SotwRequest>(body, size, max);
    assert_eq!(
        whole, cut,
        "the same body cut into chunks of {size} reads differently"
    );
    let whole = outcome::<DeltaDiscoveryRequest>(body, 0, max);
    for req in whole.iter().flatten() {
        let _ = from_node(req.node.as_ref(), Default::default());
    }
    let cut = outcome::<DeltaDiscoveryRequest>(body, size, max);
    assert_eq!(
        whole, cut,
        "the same body cut into chunks of {size} reads differently"
    );
});
