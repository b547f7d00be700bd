//! Responses as gRPC messages: the 5-byte prefix and the protobuf in one buffer of
//! exactly their size, which leaves with the message (nothing is kept per stream).
//!
//! [`frame`] encodes any prost message. [`SotwResponse`] and [`DeltaResponse`] are
//! responses over the shared resources themselves: they are written field by field
//! straight from each `Arc<XdsResource>` (Envoy's field numbers, in prost's order, so the
//! bytes equal prost's), with no `Any` copied into a `DiscoveryResponse` first.
//!
//! A SotW response's resource fields are the same bytes for every proxy that is sent the
//! same resources (every proxy of a scope): they are encoded once ([`sotw_resources`],
//! shared through the generator's cache) and each stream only writes the few bytes of its
//! own (prefix, version, type, nonce) as a chunk before them ([`Encoded`]). Those fields
//! then precede the resources, where prost writes them after: protobuf takes fields in
//! any order, and one chunk of a stream's own is one HTTP/2 DATA frame fewer per response
//! on every connection it crosses (a relay's two) than a chunk on each side.

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

/// An encoded message framed again, as it came (a relay passes a proxy's requests on).
pub(crate) fn reframe(msg: &[u8]) -> Bytes {
    let mut buf = prefixed(msg.len());
    buf.put_slice(msg);
    done(buf)
}

/// A buffer of exactly the prefix and `len` bytes, holding the prefix.
fn prefixed(len: usize) -> BytesMut {
    prefix_of(len, len)
}

/// A buffer holding the prefix of a message of `len` bytes, with room for `room` of them.
fn prefix_of(len: usize, room: usize) -> BytesMut {
    let mut buf = BytesMut::with_capacity(PREFIX_LEN + room);
    buf.put_u8(0);
    // A response has a few MB at most; gRPC cannot frame 4 GiB anyway.
    buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    buf
}

fn done(buf: BytesMut) -> Bytes {
    debug_assert_eq!(buf.len(), buf.capacity(), "encoded length mismatch");
    buf.freeze()
}

/// One gRPC message in up to two chunks, sent back to back on the stream: the bytes of
/// this stream, then bytes shared with other streams, which are not copied.
#[derive(Clone, Debug, Default)]
pub struct Encoded {
    pub head: Bytes,
    pub shared: Bytes,
}

impl Encoded {
    /// The non-empty chunks, in order.
    pub fn chunks(self) -> impl Iterator<Item = Bytes> {
        [self.head, self.shared]
            .into_iter()
            .filter(|c| !c.is_empty())
    }

    pub fn len(&self) -> usize {
        self.head.len() + self.shared.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<Bytes> for Encoded {
    fn from(head: Bytes) -> Self {
        Encoded {
            head,
            ..Default::default()
        }
    }
}

/// The `resources` fields (2) of a `DiscoveryResponse` holding `resources`, in order.
pub fn sotw_resources(resources: &[Arc<XdsResource>]) -> Bytes {
    let len = resources
        .iter()
        .map(|r| field_len(r.resource.encoded_len()))
        .sum();
    let mut buf = BytesMut::with_capacity(len);
    for r in resources {
        put_message(&mut buf, 2, &r.resource);
    }
    done(buf)
}

/// A state-of-the-world response (`envoy.service.discovery.v3.DiscoveryResponse`) over
/// the shared resources.
#[derive(Clone, Debug, Default)]
pub struct SotwResponse {
    pub version_info: String,
    /// The resources, unless `encoded_resources` holds them (then empty).
    pub resources: Vec<Arc<XdsResource>>,
    /// The resources encoded already ([`sotw_resources`]), shared with other streams;
    /// `None`: `resources` are encoded with the response.
    pub encoded_resources: Option<Bytes>,
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

/// The `resources` fields (2) of a `DeltaDiscoveryResponse` holding `resources`, in order.
pub fn delta_resources(resources: &[DeltaResource]) -> Bytes {
    let len = resources.iter().map(|r| field_len(r.encoded_len())).sum();
    let mut buf = BytesMut::with_capacity(len);
    for r in resources {
        put_header(&mut buf, 2, r.encoded_len());
        r.encode(&mut buf);
    }
    done(buf)
}

/// An incremental response (`envoy.service.discovery.v3.DeltaDiscoveryResponse`) over the
/// shared resources.
#[derive(Clone, Debug, Default)]
pub struct DeltaResponse {
    pub system_version_info: String,
    /// The resources, unless `encoded_resources` holds them (then empty).
    pub resources: Vec<DeltaResource>,
    /// The resources encoded already ([`delta_resources`]), shared with other streams;
    /// `None`: `resources` are encoded with the response.
    pub encoded_resources: Option<Bytes>,
    pub type_url: String,
    pub nonce: String,
    pub removed_resources: Vec<String>,
    pub control_plane: Option<ControlPlane>,
}

impl SotwResponse {
    fn resources_len(&self) -> usize {
        match &self.encoded_resources {
            Some(b) => b.len(),
            None => self
                .resources
                .iter()
                .map(|r| field_len(r.resource.encoded_len()))
                .sum::<usize>(),
        }
    }

    /// The fields besides version and resources: type, nonce, control plane (after the
    /// resources in prost's order, as [`Self::to_frame`] writes them; before them in chunks).
    fn rest_len(&self) -> usize {
        string_len(&self.type_url)
            + string_len(&self.nonce)
            + self
                .control_plane
                .as_ref()
                .map_or(0, |c| field_len(c.encoded_len()))
    }

    pub fn encoded_len(&self) -> usize {
        string_len(&self.version_info) + self.resources_len() + self.rest_len()
    }

    fn put_rest(&self, buf: &mut BytesMut) {
        put_string(buf, 4, &self.type_url);
        put_string(buf, 5, &self.nonce);
        if let Some(c) = &self.control_plane {
            put_message(buf, 6, c);
        }
    }

    /// The response as one gRPC message in one buffer.
    pub fn to_frame(&self) -> Bytes {
        let mut buf = prefixed(self.encoded_len());
        put_string(&mut buf, 1, &self.version_info);
        match &self.encoded_resources {
            Some(b) => buf.put_slice(b),
            None => {
                for r in &self.resources {
                    put_message(&mut buf, 2, &r.resource);
                }
            }
        }
        self.put_rest(&mut buf);
        done(buf)
    }

    /// The response as one gRPC message whose shared resource bytes are not copied: the
    /// prefix, version, type and nonce, then the shared resources.
    pub fn to_chunks(&self) -> Encoded {
        match &self.encoded_resources {
            Some(shared) => before(
                self.encoded_len(),
                &self.version_info,
                self.rest_len(),
                |rest| self.put_rest(rest),
                shared,
            ),
            None => self.to_frame().into(),
        }
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
    fn resources_len(&self) -> usize {
        match &self.encoded_resources {
            Some(b) => b.len(),
            None => self
                .resources
                .iter()
                .map(|r| field_len(r.encoded_len()))
                .sum::<usize>(),
        }
    }

    /// The fields besides version and resources: type, nonce, removed names, control
    /// plane (after the resources in [`Self::to_frame`], before them in chunks).
    fn rest_len(&self) -> usize {
        string_len(&self.type_url)
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

    pub fn encoded_len(&self) -> usize {
        string_len(&self.system_version_info) + self.resources_len() + self.rest_len()
    }

    fn put_rest(&self, buf: &mut BytesMut) {
        put_string(buf, 4, &self.type_url);
        put_string(buf, 5, &self.nonce);
        for name in &self.removed_resources {
            put_bytes(buf, 6, name.as_bytes());
        }
        if let Some(c) = &self.control_plane {
            put_message(buf, 7, c);
        }
    }

    /// The response as one gRPC message in one buffer.
    pub fn to_frame(&self) -> Bytes {
        let mut buf = prefixed(self.encoded_len());
        put_string(&mut buf, 1, &self.system_version_info);
        match &self.encoded_resources {
            Some(b) => buf.put_slice(b),
            None => {
                for r in &self.resources {
                    put_header(&mut buf, 2, r.encoded_len());
                    r.encode(&mut buf);
                }
            }
        }
        self.put_rest(&mut buf);
        done(buf)
    }

    /// The response as one gRPC message whose shared resource bytes are not copied (as
    /// [`SotwResponse::to_chunks`]).
    pub fn to_chunks(&self) -> Encoded {
        match &self.encoded_resources {
            Some(shared) => before(
                self.encoded_len(),
                &self.system_version_info,
                self.rest_len(),
                |rest| self.put_rest(rest),
                shared,
            ),
            None => self.to_frame().into(),
        }
    }
}

/// A response of `len` bytes as its own bytes before `shared` ones: the prefix, the
/// version (field 1) and the `rest_len` bytes `put_rest` writes, then `shared`.
fn before(
    len: usize,
    version: &str,
    rest_len: usize,
    put_rest: impl FnOnce(&mut BytesMut),
    shared: &Bytes,
) -> Encoded {
    let mut head = prefix_of(len, string_len(version) + rest_len);
    put_string(&mut head, 1, version);
    put_rest(&mut head);
    Encoded {
        head: done(head),
        shared: shared.clone(),
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
