//! The page tree of a snapshot's chunk refs, kept incrementally: [`Pages::seal`]
//! re-encodes only the leaf pages whose refs changed and the index pages above them.

use super::{FANOUT, IndexPage, PageOf, RefOf, level_widths, page_count, page_of};
use crate::snapshot::{
    ChunkHash, ChunkKey, ChunkRef, Encoded, Manifest, PageRef, SnapshotError, encode,
};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

#[derive(Clone, Debug)]
pub struct Pages {
    /// The leaf pages: `page_count(len)` of them once sealed.
    leaves: Vec<Slot>,
    /// The index pages, by level from the leaves up (`index[0]` lists leaf pages), each
    /// as of the last seal; `None` while it covers no chunk. Empty while the root lists
    /// the leaf pages itself.
    index: Vec<Vec<Option<Encoded>>>,
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
            leaves: vec![Slot::default()],
            index: Vec::new(),
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

    /// Leaf pages in the partition (some may be empty).
    pub fn page_count(&self) -> u32 {
        u32::try_from(self.leaves.len()).unwrap_or(u32::MAX)
    }

    /// Levels of index pages between the root and the leaf pages, as of the last seal.
    pub fn depth(&self) -> u8 {
        u8::try_from(self.index.len()).unwrap_or(u8::MAX)
    }

    /// Sets `key`'s chunk hash.
    pub fn insert(&mut self, key: ChunkKey, hash: ChunkHash) {
        let slot = self.slot(&key);
        match slot.refs.insert(key, hash) {
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
        &mut self.leaves[index]
    }

    /// Re-partitions if the page count changed, encodes the leaf pages whose refs changed
    /// and the index pages above them. Returns the pages (leaf and index) the previous
    /// seal did not have.
    pub fn seal(&mut self) -> Result<Vec<Encoded>, SnapshotError> {
        let before: HashSet<ChunkHash> = self.encoded().map(|(h, _)| *h).collect();
        let count = page_count(self.len);
        if count != self.page_count() {
            self.repartition(count);
        }
        let mut new = Vec::new();
        let mut keep = |encoded: &Option<Encoded>| {
            if let Some((hash, bytes)) = encoded
                && !before.contains(hash)
            {
                new.push((*hash, bytes.clone()));
            }
        };
        // The pages re-encoded at the level just sealed, by index.
        let mut changed = Vec::new();
        for (i, slot) in self.leaves.iter_mut().enumerate().filter(|(_, s)| s.dirty) {
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
                Some(addressed(encode(&page)?))
            };
            slot.dirty = false;
            keep(&slot.encoded);
            changed.push(i);
        }
        for level in 0..self.index.len() {
            let parents: BTreeSet<usize> = changed.iter().map(|i| i / FANOUT as usize).collect();
            let mut encoded = Vec::with_capacity(parents.len());
            for &parent in &parents {
                let pages = self.children(level, parent);
                let page = if pages.is_empty() {
                    None
                } else {
                    Some(addressed(encode(&IndexPage { pages })?))
                };
                encoded.push((parent, page));
            }
            for (parent, page) in encoded {
                keep(&page);
                self.index[level][parent] = page;
            }
            changed = parents.into_iter().collect();
        }
        Ok(new)
    }

    /// A new leaf page count: every key moves to its page among `count`, every page is
    /// re-encoded, and the index levels are those `count` leaf pages need.
    fn repartition(&mut self, count: u32) {
        let mut leaves: Vec<Slot> = (0..count)
            .map(|_| Slot {
                dirty: true,
                ..Slot::default()
            })
            .collect();
        for slot in std::mem::take(&mut self.leaves) {
            for (key, hash) in slot.refs {
                leaves[page_of(&key, count) as usize].refs.insert(key, hash);
            }
        }
        self.leaves = leaves;
        self.index = level_widths(count)[1..]
            .iter()
            .map(|&width| vec![None; width as usize])
            .collect();
    }

    /// The refs index page `parent` of index level `level` lists: its non-empty children.
    fn children(&self, level: usize, parent: usize) -> Vec<PageRef> {
        let fanout = FANOUT as usize;
        let below = self.level(level);
        let end = ((parent + 1) * fanout).min(below.len());
        (parent * fanout..end)
            .filter_map(|index| {
                let (hash, _) = below[index]?;
                Some(PageRef {
                    index: u32::try_from(index).ok()?,
                    hash: *hash,
                })
            })
            .collect()
    }

    /// The pages of `level` (0: the leaf pages), as of the last seal.
    fn level(&self, level: usize) -> Vec<Option<&Encoded>> {
        match level.checked_sub(1) {
            None => self.leaves.iter().map(|s| s.encoded.as_ref()).collect(),
            Some(index) => self.index[index].iter().map(Option::as_ref).collect(),
        }
    }

    /// Every non-empty page as of the last seal, encoded: the leaf pages by index, then
    /// each index level from the leaves up.
    pub fn encoded(&self) -> impl Iterator<Item = &Encoded> {
        let leaves = self.leaves.iter().filter_map(|s| s.encoded.as_ref());
        leaves.chain(self.index.iter().flatten().flatten())
    }

    /// Every non-empty page as of the last seal, by level: the leaf pages first, then
    /// each index level from the leaves up.
    pub fn levels(&self) -> Vec<Vec<&Encoded>> {
        (0..=self.index.len())
            .map(|level| self.level(level).into_iter().flatten().collect())
            .collect()
    }

    /// The pages a change of `key`'s chunk re-encodes, as of the last seal: its leaf page,
    /// then the index page above at each level (those that exist).
    pub fn path(&self, key: &ChunkKey) -> Vec<&Encoded> {
        let mut index = page_of(key, self.page_count()) as usize;
        let mut path: Vec<&Encoded> = self.leaves[index].encoded.iter().collect();
        for level in &self.index {
            index /= FANOUT as usize;
            path.extend(&level[index]);
        }
        path
    }

    /// What the root manifest lists, as of the last seal: the top index level's pages, or
    /// the leaf pages when there is no index level.
    pub fn refs(&self) -> Vec<PageRef> {
        let top = self.level(self.index.len());
        top.into_iter()
            .enumerate()
            .filter_map(|(index, page)| {
                let (hash, _) = page?;
                Some(PageRef {
                    index: u32::try_from(index).ok()?,
                    hash: *hash,
                })
            })
            .collect()
    }

    /// The root manifest of snapshot `version`, as of the last seal.
    pub fn manifest(&self, version: u64, built_unix_nanos: u64) -> Manifest {
        debug_assert!(self.leaves.iter().all(|s| !s.dirty), "pages not sealed");
        Manifest {
            version,
            built_unix_nanos,
            depth: self.depth(),
            pages: self.refs(),
        }
    }
}

fn addressed(bytes: Vec<u8>) -> Encoded {
    (ChunkHash::of(&bytes), Arc::new(bytes))
}
