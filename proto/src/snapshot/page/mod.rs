//! Pages: the second level of a snapshot's index. Each chunk key falls into one page by
//! a stable hash; a page lists the refs (key, hash) of its keys, sorted by key, and is
//! stored content-addressed beside the chunks. The root manifest lists the pages.
//!
//! ```text
//!  key ──BLAKE3(tagged fields), low bits──► page index < page_count(chunks)
//!  page_count(n) = smallest power of two ≥ ⌈n / PAGE_TARGET⌉   (≥ 1)
//! ```
//!
//! So a page holds 32 to 64 refs on average (at 10,010 chunks: 256 pages of ~39), one
//! key's change re-encodes one page, and the partition is a pure function of the set of
//! keys: every builder that builds the same revision writes the same pages. The page
//! count changes only when the number of chunks crosses `PAGE_TARGET` times a power of
//! two; that build rewrites every page (adding or removing a service, a full push anyway).

use super::{
    ChunkHash, ChunkKey, ChunkRef, Encoded, Manifest, PageRef, SnapshotError, decode_addressed,
    encode,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// The most refs a page holds on average (the least is half of it).
pub const PAGE_TARGET: usize = 64;

/// How many pages a snapshot of `chunks` chunks has: the smallest power of two at least
/// `chunks / PAGE_TARGET`, and at least 1.
pub fn page_count(chunks: usize) -> u32 {
    let pages = chunks.div_ceil(PAGE_TARGET).max(1).next_power_of_two();
    u32::try_from(pages).unwrap_or(1 << 31)
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

/// The refs of the chunk keys that fall into one page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    /// Sorted by key.
    pub chunks: Vec<ChunkRef>,
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

/// A snapshot's chunk refs partitioned into pages, kept incrementally: [`Pages::seal`]
/// re-encodes only the pages whose refs changed since the last seal.
#[derive(Clone, Debug)]
pub struct Pages {
    /// One per page: `page_count(len)` of them once sealed.
    slots: Vec<Slot>,
    /// Chunk refs held.
    len: usize,
}

#[derive(Clone, Debug, Default)]
struct Slot {
    refs: BTreeMap<ChunkKey, ChunkHash>,
    /// As of the last seal; `None` while the page holds no ref.
    encoded: Option<Encoded>,
    /// Refs changed since the last seal.
    dirty: bool,
}

impl Default for Pages {
    fn default() -> Self {
        Pages {
            slots: vec![Slot::default()],
            len: 0,
        }
    }
}

impl Pages {
    pub fn new() -> Self {
        Self::default()
    }

    /// The pages of `refs`, sealed.
    pub fn of(refs: impl IntoIterator<Item = ChunkRef>) -> Result<Self, SnapshotError> {
        let mut pages = Pages::new();
        for r in refs {
            pages.insert(r.key, r.hash);
        }
        pages.seal()?;
        Ok(pages)
    }

    /// Chunk refs held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pages in the partition (some may be empty).
    pub fn page_count(&self) -> u32 {
        u32::try_from(self.slots.len()).unwrap_or(u32::MAX)
    }

    /// Sets `key`'s chunk hash.
    pub fn insert(&mut self, key: ChunkKey, hash: ChunkHash) {
        let slot = self.slot(&key);
        match slot.refs.insert(key, hash.clone()) {
            Some(old) if old == hash => {}
            Some(_) => slot.dirty = true,
            None => {
                slot.dirty = true;
                self.len += 1;
            }
        }
    }

    /// Drops `key`'s ref.
    pub fn remove(&mut self, key: &ChunkKey) {
        let slot = self.slot(key);
        if slot.refs.remove(key).is_some() {
            slot.dirty = true;
            self.len -= 1;
        }
    }

    fn slot(&mut self, key: &ChunkKey) -> &mut Slot {
        let index = page_of(key, self.page_count()) as usize;
        &mut self.slots[index]
    }

    /// Re-partitions if the page count changed and encodes the pages whose refs changed.
    /// Returns the pages the previous seal did not have.
    pub fn seal(&mut self) -> Result<Vec<Encoded>, SnapshotError> {
        let before: HashSet<ChunkHash> = self.encoded().map(|(h, _)| h.clone()).collect();
        let count = page_count(self.len);
        if count != self.page_count() {
            let mut slots: Vec<Slot> = (0..count)
                .map(|_| Slot {
                    dirty: true,
                    ..Slot::default()
                })
                .collect();
            for slot in std::mem::take(&mut self.slots) {
                for (key, hash) in slot.refs {
                    slots[page_of(&key, count) as usize].refs.insert(key, hash);
                }
            }
            self.slots = slots;
        }
        let mut new = Vec::new();
        for slot in self.slots.iter_mut().filter(|s| s.dirty) {
            slot.encoded = if slot.refs.is_empty() {
                None
            } else {
                let page = PageOf {
                    chunks: slot
                        .refs
                        .iter()
                        .map(|(key, hash)| RefOf { key, hash })
                        .collect(),
                };
                let bytes = encode(&page)?;
                Some((ChunkHash::of(&bytes), Arc::new(bytes)))
            };
            slot.dirty = false;
            if let Some((hash, bytes)) = &slot.encoded
                && !before.contains(hash)
            {
                new.push((hash.clone(), bytes.clone()));
            }
        }
        Ok(new)
    }

    /// Every non-empty page as of the last seal, encoded, by index.
    pub fn encoded(&self) -> impl Iterator<Item = &Encoded> {
        self.slots.iter().filter_map(|s| s.encoded.as_ref())
    }

    /// The page list (index, hash) of the last seal: what the root manifest lists.
    pub fn refs(&self) -> Vec<PageRef> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(index, s)| {
                let (hash, _) = s.encoded.as_ref()?;
                Some(PageRef {
                    index: u32::try_from(index).ok()?,
                    hash: hash.clone(),
                })
            })
            .collect()
    }

    /// The root manifest of snapshot `version`, as of the last seal.
    pub fn manifest(&self, version: u64, built_unix_nanos: u64) -> Manifest {
        debug_assert!(self.slots.iter().all(|s| !s.dirty), "pages not sealed");
        Manifest {
            version,
            built_unix_nanos,
            pages: self.refs(),
        }
    }
}

#[cfg(test)]
mod tests;
