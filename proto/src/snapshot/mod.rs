//! Snapshots: a PushContext split into content-addressed chunks, indexed by a tree of
//! pages, under a small root manifest.
//!
//! ```text
//! shoal:snap:<version>  Manifest { version, built, depth, pages: [(index, hash) ≤ 64] }
//!                           │ per page ref                                    the root
//!                           ▼
//! shoal:chunk:<hash>    IndexPage { pages: [(index, hash) ≤ 64] }   `depth` levels of
//!                           │ per page ref                          these (0 below 4,097
//!                           ▼                                       chunks, then 1, 2 …)
//! shoal:chunk:<hash>    Page { chunks: [(ChunkKey, ChunkHash) ...] }   the keys that hash
//!                           │ per key                                  to this leaf page
//!                           ▼
//! shoal:chunk:<hash>    Chunk: one NamespaceConfig, or one service's ServiceEndpoints
//! ```
//!
//! A chunk's hash is the BLAKE3 of its encoding, so equal content has one key. Pages are
//! content-addressed the same way and live beside the chunks ([`page`]: ~64 refs per
//! leaf page, partitioned by a stable hash of the key; at most 64 per index page), so an
//! endpoint change writes (and an edge fetches) one small chunk, one page per level and
//! the root, never the mesh, and that stays bounded as the mesh grows. Every encoding is
//! postcard behind a format byte, so a layout change is told apart, never misread.

pub mod page;

pub use page::{FANOUT, IndexPage, PAGE_TARGET, Page, Pages, level_widths, page_count, page_of};

use crate::model::{NamespaceConfig, ServiceEndpoints, ServiceKey};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// The first byte of every encoded chunk, page and manifest; bumped whenever a layout
/// changes. 1: one flat manifest listing every chunk. 2: a root manifest listing pages.
/// 3: namespace chunks carry network gateways, load balancers their locality setting.
/// 4: VirtualServices carry TLS routes, faults, mirrors, CORS, header operations,
/// direct responses and delegates. 5: Gateway servers carry TLS settings; namespace
/// chunks carry TLS credentials (Secrets) for gateways; traffic policies carry client
/// TLS, cookie hashing, ring hash and Maglev settings; Sidecars carry ingress listeners.
/// 6: routing objects carry their creation time. 7: namespace chunks carry
/// `security.istio.io` policies. 8: MeshConfig carries `extensionProviders`.
/// 9: the root lists index pages over the leaf pages once they outnumber 64 (a tree).
/// 10: content addresses are their 16 bytes, not 32 hex digits.
pub const FORMAT_VERSION: u8 = 10;

/// What each earlier format lacked, by format, for the message that refuses it.
const OLDER_FORMATS: &str = "1 was the flat manifest listing every chunk, 2 had no network \
    gateways, 3 no fault injection or mirrors, 4 no gateway TLS, credentials, client TLS, \
    cookie hashing or Sidecar ingress, 5 no creation times, 6 no security policies, 7 no \
    extension providers, 8 a root listing every leaf page, 9 content addresses in hex";

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("encode: {0}")]
    Encode(String),
    #[error("decode: {0}")]
    Decode(String),
    /// Builders and edges of different snapshot formats: what was read names the
    /// format it was written in, and whether that is older or newer than this build's.
    #[error("{}", format_mismatch(*.0))]
    Format(u8),
    #[error("chunk {0} does not match its hash")]
    Corrupt(ChunkHash),
}

fn format_mismatch(found: u8) -> String {
    let age = if found > FORMAT_VERSION {
        "newer than this build reads: the builders run a newer build, upgrade this one"
    } else {
        "older than this build reads: the builders run an older build, upgrade them"
    };
    format!(
        "snapshot format {found} is {age} (this build reads format {FORMAT_VERSION}; \
         {OLDER_FORMATS}): builders and edges must share a snapshot format"
    )
}

/// The content address of a chunk or page: 128 bits of BLAKE3. Encoded as its 16
/// bytes; shown, and named in the store's keys, as 32 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkHash([u8; 16]);

impl ChunkHash {
    pub fn of(bytes: &[u8]) -> Self {
        let hash = blake3::hash(bytes);
        let mut first = [0; 16];
        first.copy_from_slice(&hash.as_bytes()[..16]);
        ChunkHash(first)
    }
}

impl fmt::Display for ChunkHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut hex = [0; 32];
        for (i, b) in self.0.iter().enumerate() {
            hex[2 * i] = HEX[usize::from(b >> 4)];
            hex[2 * i + 1] = HEX[usize::from(b & 0xf)];
        }
        // Only ASCII digits were written.
        f.write_str(std::str::from_utf8(&hex).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for ChunkHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ChunkHash({self})")
    }
}

impl std::str::FromStr for ChunkHash {
    type Err = String;

    /// Reads the 32 hex digits [`Display`](fmt::Display) writes.
    fn from_str(hex: &str) -> Result<Self, String> {
        let digits = hex.as_bytes();
        if digits.len() != 32 {
            return Err(format!("a content address is 32 hex digits, not {hex:?}"));
        }
        let digit = |c: u8| {
            (c as char)
                .to_digit(16)
                .filter(|_| !c.is_ascii_uppercase())
                .ok_or_else(|| format!("{hex:?} is not lowercase hex"))
        };
        let mut bytes = [0; 16];
        for (i, pair) in digits.chunks_exact(2).enumerate() {
            bytes[i] = (digit(pair[0])? << 4 | digit(pair[1])?) as u8;
        }
        Ok(ChunkHash(bytes))
    }
}

// Snapshots are postcard: the 16 bytes as they are. A human-readable format (JSON in a
// status page) gets the hex digits a person would search the store for.
impl Serialize for ChunkHash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.collect_str(self)
        } else {
            self.0.serialize(s)
        }
    }
}

impl<'de> Deserialize<'de> for ChunkHash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            let hex = String::deserialize(d)?;
            hex.parse().map_err(serde::de::Error::custom)
        } else {
            <[u8; 16]>::deserialize(d).map(ChunkHash)
        }
    }
}

/// What a chunk holds, so a reader knows where it goes without decoding it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ChunkKey {
    Namespace(String),
    Endpoints(ServiceKey),
}

// A namespace chunk's header is a few hundred bytes of Vec headers; chunks are few and
// short-lived between decoding and the PushContext's Arcs, so boxing buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Chunk {
    Namespace(NamespaceConfig),
    Endpoints(ServiceEndpoints),
}

impl Chunk {
    pub fn key(&self) -> ChunkKey {
        match self {
            Chunk::Namespace(ns) => ChunkKey::Namespace(ns.namespace.clone()),
            Chunk::Endpoints(eps) => ChunkKey::Endpoints(eps.service.clone()),
        }
    }
}

/// An encoded chunk or page and its content address, as written to the store.
pub type Encoded = (ChunkHash, Arc<Vec<u8>>);

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkRef {
    pub key: ChunkKey,
    pub hash: ChunkHash,
}

/// The root of one snapshot version: the top of the page tree that lists its chunks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u64,
    /// Unix nanoseconds of the build.
    pub built_unix_nanos: u64,
    /// Levels of [`IndexPage`]s between the root and the leaf [`Page`]s: 0 when `pages`
    /// lists the leaf pages themselves.
    pub depth: u8,
    /// At most [`FANOUT`], sorted by index; a page that would hold no chunk is left out.
    pub pages: Vec<PageRef>,
}

/// A page of the level below: its index in that level and its content address.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageRef {
    pub index: u32,
    pub hash: ChunkHash,
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, SnapshotError> {
    let mut out = vec![FORMAT_VERSION];
    let body = postcard::to_stdvec(value).map_err(|e| SnapshotError::Encode(e.to_string()))?;
    out.extend_from_slice(&body);
    Ok(out)
}

fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, SnapshotError> {
    match bytes.first() {
        Some(&FORMAT_VERSION) => {
            postcard::from_bytes(&bytes[1..]).map_err(|e| SnapshotError::Decode(e.to_string()))
        }
        Some(&other) => Err(SnapshotError::Format(other)),
        None => Err(SnapshotError::Decode("empty".into())),
    }
}

/// Decodes content fetched by its address, checking the bytes against it.
fn decode_addressed<T: for<'a> Deserialize<'a>>(
    hash: &ChunkHash,
    bytes: &[u8],
) -> Result<T, SnapshotError> {
    if &ChunkHash::of(bytes) != hash {
        return Err(SnapshotError::Corrupt(*hash));
    }
    decode(bytes)
}

impl Chunk {
    /// Encodes the chunk; returns its bytes and content hash.
    pub fn encode(&self) -> Result<(ChunkHash, Vec<u8>), SnapshotError> {
        let bytes = encode(self)?;
        Ok((ChunkHash::of(&bytes), bytes))
    }

    /// Decodes a chunk, checking it against the hash it was fetched by.
    pub fn decode(hash: &ChunkHash, bytes: &[u8]) -> Result<Chunk, SnapshotError> {
        decode_addressed(hash, bytes)
    }
}

impl Manifest {
    pub fn encode(&self) -> Result<Vec<u8>, SnapshotError> {
        encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Manifest, SnapshotError> {
        decode(bytes)
    }
}

#[cfg(test)]
mod tests;
