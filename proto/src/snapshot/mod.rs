//! Snapshots: a PushContext split into content-addressed chunks plus a manifest.
//!
//! ```text
//! shoal:snap:<version> ──► Manifest { version, chunks: [ (ChunkKey, ChunkHash) ... ] }
//!                                                        │
//! shoal:chunk:<hash>   ◄─────────────────────────────────┘  one NamespaceConfig, or one
//!                                                           service's ServiceEndpoints
//! ```
//!
//! A chunk's hash is the BLAKE3 of its encoding, so equal content has one key: an
//! endpoint change writes one small chunk and a manifest, never the mesh. Encoding is
//! postcard behind a format byte, so a future layout can be told apart.

pub mod page;

pub use page::{PAGE_TARGET, Page, Pages, page_count, page_of};

use crate::model::{NamespaceConfig, ServiceEndpoints, ServiceKey};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// Bumped whenever a chunk or manifest layout changes.
pub const FORMAT_VERSION: u8 = 1;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("encode: {0}")]
    Encode(String),
    #[error("decode: {0}")]
    Decode(String),
    #[error("unsupported snapshot format {0} (this build reads {FORMAT_VERSION})")]
    Format(u8),
    #[error("chunk {0} does not match its hash")]
    Corrupt(ChunkHash),
}

/// The content address of a chunk or page: 128 bits of BLAKE3, hex.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ChunkHash(pub String);

impl ChunkHash {
    pub fn of(bytes: &[u8]) -> Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let hash = blake3::hash(bytes);
        let mut hex = String::with_capacity(32);
        for b in &hash.as_bytes()[..16] {
            hex.push(HEX[usize::from(b >> 4)] as char);
            hex.push(HEX[usize::from(b & 0xf)] as char);
        }
        ChunkHash(hex)
    }
}

impl fmt::Display for ChunkHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a chunk holds, so a reader knows where it goes without decoding it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ChunkKey {
    Namespace(String),
    Endpoints(ServiceKey),
}

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

/// The list of chunks that make one snapshot version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u64,
    /// Unix nanoseconds of the build.
    pub built_unix_nanos: u64,
    /// Sorted by key.
    pub chunks: Vec<ChunkRef>,
}

/// One page of a snapshot: its index in the partition and its content address.
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
        return Err(SnapshotError::Corrupt(hash.clone()));
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
mod tests {
    use super::*;
    use crate::model::Endpoint;
    use std::collections::BTreeMap;

    fn endpoints(addr: &str) -> Chunk {
        Chunk::Endpoints(ServiceEndpoints {
            service: ServiceKey {
                hostname: "a.ns.svc.cluster.local".into(),
                namespace: "ns".into(),
            },
            endpoints: vec![Endpoint {
                address: addr.into(),
                port: 8080,
                service_port: 80,
                labels: BTreeMap::from([("version".into(), "v1".into())]),
                cluster: "c1".into(),
                network: String::new(),
                locality: String::new(),
                weight: 1,
                healthy: true,
                service_account: String::new(),
            }],
        })
    }

    #[test]
    fn chunk_round_trip_and_content_addressing() {
        let (h1, b1) = endpoints("10.0.0.1").encode().unwrap();
        let (h2, _) = endpoints("10.0.0.1").encode().unwrap();
        let (h3, _) = endpoints("10.0.0.2").encode().unwrap();
        assert_eq!(h1, h2);
        assert_ne!(h1, h3);
        assert_eq!(Chunk::decode(&h1, &b1).unwrap(), endpoints("10.0.0.1"));
        assert!(matches!(
            Chunk::decode(&h3, &b1),
            Err(SnapshotError::Corrupt(_))
        ));
    }

    #[test]
    fn chunk_hash_is_lowercase_hex_of_the_first_128_bits_of_blake3() {
        // BLAKE3("") = af1349b9f5f9a1a6a0404dea36dcc949 9bcb25c9adc112b7cc9a93cae41f3262
        assert_eq!(ChunkHash::of(b"").0, "af1349b9f5f9a1a6a0404dea36dcc949");
    }

    #[test]
    fn manifest_round_trip_and_format_check() {
        let m = Manifest {
            version: 7,
            built_unix_nanos: 1,
            chunks: vec![ChunkRef {
                key: ChunkKey::Namespace("ns".into()),
                hash: ChunkHash::of(b"x"),
            }],
        };
        let mut bytes = m.encode().unwrap();
        assert_eq!(Manifest::decode(&bytes).unwrap(), m);
        bytes[0] = 99;
        assert!(matches!(
            Manifest::decode(&bytes),
            Err(SnapshotError::Format(99))
        ));
    }
}
