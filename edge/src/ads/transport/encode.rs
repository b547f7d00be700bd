//! Responses as gRPC messages: the 5-byte prefix and the protobuf in one buffer of
//! exactly their size, which leaves with the message (nothing is kept per stream).
//!
//! [`frame`] encodes any prost message. [`SotwResponse`] and [`DeltaResponse`] are
//! responses over the shared resources themselves: they are written field by field
//! straight from each `Arc<XdsResource>` (Envoy's field numbers, in prost's order, so the
//! bytes equal prost's), with no `Any` copied into a `DiscoveryResponse` first.

use super::framing::PREFIX_LEN;
use crate::xds::XdsResource;
use bytes::{BufMut, Bytes, BytesMut};
use envoy_types::pb::envoy::config::core::v3::ControlPlane;
use prost::Message;
use std::sync::Arc;

/// `msg` as one uncompressed gRPC message (a relayed request; tests).
pub(crate) fn frame(msg: &impl Message) -> Bytes {
    let len = msg.encoded_len();
    let mut buf = prefixed(len);
    msg.encode_raw(&mut buf);
    done(buf)
}

/// A buffer of exactly the prefix and `len` bytes, holding the prefix.
fn prefixed(len: usize) -> BytesMut {
    let mut buf = BytesMut::with_capacity(PREFIX_LEN + len);
    buf.put_u8(0);
    // A response has a few MB at most; gRPC cannot frame 4 GiB anyway.
    buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    buf
}

fn done(buf: BytesMut) -> Bytes {
    debug_assert_eq!(buf.len(), buf.capacity(), "encoded length mismatch");
    buf.freeze()
}

/// A state-of-the-world response (`envoy.service.discovery.v3.DiscoveryResponse`) over
/// the shared resources.
#[derive(Clone, Debug, Default)]
pub struct SotwResponse {
    pub version_info: String,
    pub resources: Vec<Arc<XdsResource>>,
    pub type_url: String,
    pub nonce: String,
    pub control_plane: Option<ControlPlane>,
}

/// One resource of a [`DeltaResponse`]: a shared resource and its version.
#[derive(Clone, Debug)]
pub struct DeltaResource {
    pub resource: Arc<XdsResource>,
    pub version: String,
}

/// An incremental response (`envoy.service.discovery.v3.DeltaDiscoveryResponse`) over the
/// shared resources.
#[derive(Clone, Debug, Default)]
pub struct DeltaResponse {
    pub system_version_info: String,
    pub resources: Vec<DeltaResource>,
    pub type_url: String,
    pub nonce: String,
    pub removed_resources: Vec<String>,
    pub control_plane: Option<ControlPlane>,
}

impl SotwResponse {
    pub fn encoded_len(&self) -> usize {
        string_len(&self.version_info)
            + self
                .resources
                .iter()
                .map(|r| field_len(r.resource.encoded_len()))
                .sum::<usize>()
            + string_len(&self.type_url)
            + string_len(&self.nonce)
            + self
                .control_plane
                .as_ref()
                .map_or(0, |c| field_len(c.encoded_len()))
    }

    /// The response as one gRPC message.
    pub fn to_frame(&self) -> Bytes {
        let mut buf = prefixed(self.encoded_len());
        put_string(&mut buf, 1, &self.version_info);
        for r in &self.resources {
            put_message(&mut buf, 2, &r.resource);
        }
        put_string(&mut buf, 4, &self.type_url);
        put_string(&mut buf, 5, &self.nonce);
        if let Some(c) = &self.control_plane {
            put_message(&mut buf, 6, c);
        }
        done(buf)
    }
}

impl DeltaResource {
    /// `envoy.service.discovery.v3.Resource` {version = 1, resource = 2, name = 3}.
    fn encoded_len(&self) -> usize {
        string_len(&self.version)
            + field_len(self.resource.resource.encoded_len())
            + string_len(&self.resource.name)
    }

    fn encode(&self, buf: &mut BytesMut) {
        put_string(buf, 1, &self.version);
        put_message(buf, 2, &self.resource.resource);
        put_string(buf, 3, &self.resource.name);
    }
}

impl DeltaResponse {
    pub fn encoded_len(&self) -> usize {
        string_len(&self.system_version_info)
            + self
                .resources
                .iter()
                .map(|r| field_len(r.encoded_len()))
                .sum::<usize>()
            + string_len(&self.type_url)
            + string_len(&self.nonce)
            + self
                .removed_resources
                .iter()
                .map(|n| field_len(n.len()))
                .sum::<usize>()
            + self
                .control_plane
                .as_ref()
                .map_or(0, |c| field_len(c.encoded_len()))
    }

    /// The response as one gRPC message.
    pub fn to_frame(&self) -> Bytes {
        let mut buf = prefixed(self.encoded_len());
        put_string(&mut buf, 1, &self.system_version_info);
        for r in &self.resources {
            put_header(&mut buf, 2, r.encoded_len());
            r.encode(&mut buf);
        }
        put_string(&mut buf, 4, &self.type_url);
        put_string(&mut buf, 5, &self.nonce);
        for name in &self.removed_resources {
            put_bytes(&mut buf, 6, name.as_bytes());
        }
        if let Some(c) = &self.control_plane {
            put_message(&mut buf, 7, c);
        }
        done(buf)
    }
}

// Length-delimited fields with tags below 16, whose key is one byte.

fn varint_len(v: u64) -> usize {
    // 7 bits a byte: 1 to 10 bytes.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn put_varint(buf: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        buf.put_u8(v as u8 | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// The size of a field whose value has `len` bytes.
fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// A proto3 string: absent when empty.
fn string_len(s: &str) -> usize {
    if s.is_empty() { 0 } else { field_len(s.len()) }
}

fn put_header(buf: &mut BytesMut, tag: u8, len: usize) {
    debug_assert!(tag < 16);
    buf.put_u8(tag << 3 | 2);
    put_varint(buf, len as u64);
}

fn put_bytes(buf: &mut BytesMut, tag: u8, bytes: &[u8]) {
    put_header(buf, tag, bytes.len());
    buf.put_slice(bytes);
}

fn put_string(buf: &mut BytesMut, tag: u8, s: &str) {
    if !s.is_empty() {
        put_bytes(buf, tag, s.as_bytes());
    }
}

fn put_message(buf: &mut BytesMut, tag: u8, m: &impl Message) {
    put_header(buf, tag, m.encoded_len());
    m.encode_raw(buf);
}

#[cfg(test)]
mod tests;
