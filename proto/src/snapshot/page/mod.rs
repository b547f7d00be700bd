//! Pages: the index of a snapshot's chunks, a tree of content-addressed pages stored
//! beside the chunks under a small root manifest.
//!
//! ```text
//!  key ──BLAKE3(tagged fields), low bits──► leaf page index < page_count(chunks)
//!  page_count(n) = smallest power of two ≥ ⌈n / PAGE_TARGET⌉   (≥ 1)
//!
//!  root (Manifest, depth d) ── ≤ FANOUT refs ──► index pages of level d
//!  index page of level l ─── ≤ FANOUT refs ──► index pages of level l - 1 … level 1
//!  index page of level 1 ─── ≤ FANOUT refs ──► leaf pages (level 0): Page
//!  index page i of level l lists the pages FANOUT·i .. FANOUT·(i + 1) of level l - 1
//! ```
//!
//! So a leaf page holds 32 to 64 refs on average (at 10,010 chunks: 256 pages of ~39),
//! an index page at most [`FANOUT`] page refs, and the root as many; one key's change
//! re-encodes its leaf page and the `d` index pages above it, `d` growing by one each
//! time the mesh grows 64-fold (0 up to 4,096 chunks, 1 up to 262,144, 2 up to 16.7 M):
//! every page one change writes is bounded, and so is the change. The partition is a
//! pure function of the set of keys: every builder that builds the same revision writes
//! the same pages. The page count changes only when the number of chunks crosses
//! `PAGE_TARGET` times a power of two; that build rewrites every page (adding or removing
//! a service, a full push anyway).

mod pages;

pub use pages::Pages;

use super::{ChunkHash, ChunkKey, ChunkRef, PageRef, SnapshotError, decode_addressed, encode};
use serde::{Deserialize, Serialize};

/// The most refs a leaf page holds on average (the least is half of it).
pub const PAGE_TARGET: usize = 64;

/// The most page refs an index page, or the root, holds: a power of two, so that the
/// index pages of a power-of-two page count divide it exactly.
pub const FANOUT: u32 = 64;

/// How many leaf pages a snapshot of `chunks` chunks has: the smallest power of two at
/// least `chunks / PAGE_TARGET`, and at least 1.
pub fn page_count(chunks: usize) -> u32 {
    let pages = chunks.div_ceil(PAGE_TARGET).max(1).next_power_of_two();
    u32::try_from(pages).unwrap_or(1 << 31)
}

/// How many pages each level of the tree over `pages` leaf pages has, leaves first: the
/// last level is what the root lists (at most [`FANOUT`]), and the levels above the
/// first are index pages. `[pages]` alone while the root can list every leaf page.
pub fn level_widths(pages: u32) -> Vec<u32> {
    let mut widths = vec![pages.max(1)];
    while let Some(&width) = widths.last()
        && width > FANOUT
    {
        widths.push(width.div_ceil(FANOUT));
    }
    widths
}

/// The page `key` falls into among `pages` (a power of two): the low bits of 64 bits of
/// BLAKE3 over its tagged fields. Stable across processes, builds and platforms.
pub fn page_of(key: &ChunkKey, pages: u32) -> u32 {
    debug_assert!(pages.is_power_of_two(), "{pages} pages");
    if pages <= 1 {
        return 0;
    }
    // Truncation keeps the low bits, which is the point.
    (key_hash(key) & u64::from(pages - 1)) as u32
}

fn key_hash(key: &ChunkKey) -> u64 {
    // 0xff never occurs in UTF-8, so the fields cannot run into each other.
    let mut hasher = blake3::Hasher::new();
    match key {
        ChunkKey::Namespace(ns) => {
            hasher.update(b"namespace\xff");
            hasher.update(ns.as_bytes());
        }
        ChunkKey::Endpoints(svc) => {
            hasher.update(b"endpoints\xff");
            hasher.update(svc.namespace.as_bytes());
            hasher.update(b"\xff");
            hasher.update(svc.hostname.as_bytes());
        }
    }
    let mut first = [0u8; 8];
    first.copy_from_slice(&hasher.finalize().as_bytes()[..8]);
    u64::from_le_bytes(first)
}

/// A leaf page: the refs of the chunk keys that fall into it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    /// Sorted by key.
    pub chunks: Vec<ChunkRef>,
}

/// An index page: the pages of the level below that it covers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexPage {
    /// Sorted by index (the index within the level below); a page that would hold no
    /// chunk is left out.
    pub pages: Vec<PageRef>,
}

/// A [`Page`] encoded from the refs where they are held (the same bytes, no clones).
#[derive(Serialize)]
#[serde(rename = "Page")]
struct PageOf<'a> {
    chunks: Vec<RefOf<'a>>,
}

#[derive(Serialize)]
#[serde(rename = "ChunkRef")]
struct RefOf<'a> {
    key: &'a ChunkKey,
    hash: &'a ChunkHash,
}

impl Page {
    /// Encodes the page; returns its bytes and content hash.
    pub fn encode(&self) -> Result<(ChunkHash, Vec<u8>), SnapshotError> {
        let bytes = encode(self)?;
        Ok((ChunkHash::of(&bytes), bytes))
    }

    /// Decodes a page, checking it against the hash it was fetched by.
    pub fn decode(hash: &ChunkHash, bytes: &[u8]) -> Result<Page, SnapshotError> {
        decode_addressed(hash, bytes)
    }
}

impl IndexPage {
    /// Encodes the index page; returns its bytes and content hash.
    pub fn encode(&self) -> Result<(ChunkHash, Vec<u8>), SnapshotError> {
        let bytes = encode(self)?;
        Ok((ChunkHash::of(&bytes), bytes))
    }

    /// Decodes an index page, checking it against the hash it was fetched by.
    pub fn decode(hash: &ChunkHash, bytes: &[u8]) -> Result<IndexPage, SnapshotError> {
        decode_addressed(hash, bytes)
    }
}

#[cfg(test)]
mod tests;
