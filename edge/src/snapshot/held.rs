//! What an edge holds of its snapshot, and what a new root manifest asks it to fetch.
//! I/O-free.
//!
//! ```text
//!  root's page refs ──hash not held──► fetch (one round trip per level, top down)
//!  fetched index pages ──refs whose hash is not held──► the next level's fetch
//!  fetched leaf pages ──ref (key, hash) ≠ held──► chunks to fetch
//!  held pages the new tree no longer names (found from the held root down, skipping
//!  every page the root or a fetched index page names) ──their keys in no fetched leaf
//!  page──► keys removed
//! ```
//!
//! Pages are content-addressed and a page's bytes fix the whole subtree below it, so a
//! page whose hash the edge holds is skipped with everything under it: one changed chunk
//! costs one page per level. A leaf page whose hash is unchanged lists exactly the keys
//! it did, so keys can only have moved between the leaf pages fetched and those dropped:
//! the rule holds even when the page count changed and every page is new.

use shoal_proto::snapshot::{
    ChunkHash, ChunkKey, IndexPage, Manifest, Page, PageRef, SnapshotError,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

#[derive(Debug, Default)]
pub(super) struct Held {
    /// The pages the root lists.
    root: Vec<ChunkHash>,
    /// Every page of the held tree, index and leaf, by hash.
    pages: HashMap<ChunkHash, HeldPage>,
    chunks: BTreeMap<ChunkKey, ChunkHash>,
}

#[derive(Debug)]
enum HeldPage {
    /// The pages it lists.
    Index(Vec<ChunkHash>),
    /// The keys it lists.
    Leaf(Vec<ChunkKey>),
}

/// The walk down a new root's page tree, a level per round trip: what to fetch next,
/// and what was fetched.
#[derive(Debug)]
pub(super) struct Descent {
    /// The level of the pages wanted: 0 for leaf pages.
    level: u8,
    wanted: Vec<ChunkHash>,
    fetched: Fetched,
}

/// The pages of a new tree that the edge did not hold, decoded.
#[derive(Debug, Default)]
pub(super) struct Fetched {
    index: HashMap<ChunkHash, IndexPage>,
    /// In the order fetched.
    leaves: Vec<(ChunkHash, Page)>,
}

/// What a new snapshot asks of the store, given the pages fetched.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Plan {
    /// Chunks whose hash the edge does not hold, by key.
    pub fetch: Vec<ChunkHash>,
    /// Keys the new snapshot no longer has.
    pub removed: Vec<ChunkKey>,
}

impl Held {
    /// Starts the walk down `root`'s tree: the pages it lists that this edge lacks.
    pub fn descend(&self, root: &Manifest) -> Descent {
        Descent {
            level: root.depth,
            wanted: self.lacking(&root.pages),
            fetched: Fetched::default(),
        }
    }

    fn lacking(&self, refs: &[PageRef]) -> Vec<ChunkHash> {
        refs.iter()
            .filter(|p| !self.pages.contains_key(&p.hash))
            .map(|p| p.hash)
            .collect()
    }

    /// Held pages the new tree (`root` and the pages `fetched` of it) no longer has: from
    /// the held root down, every page neither the root nor a fetched index page names.
    fn dropped<'a>(&'a self, root: &Manifest, fetched: &Fetched) -> Vec<&'a ChunkHash> {
        let named: HashSet<&ChunkHash> = root
            .pages
            .iter()
            .chain(fetched.index.values().flat_map(|p| &p.pages))
            .map(|p| &p.hash)
            .collect();
        let mut dropped = Vec::new();
        let mut stack: Vec<&ChunkHash> = self.root.iter().collect();
        while let Some(hash) = stack.pop() {
            if named.contains(hash) {
                continue;
            }
            dropped.push(hash);
            if let Some(HeldPage::Index(pages)) = self.pages.get(hash) {
                stack.extend(pages);
            }
        }
        dropped
    }

    /// The keys of the leaf pages among `pages`.
    fn keys<'a>(&'a self, pages: &[&ChunkHash]) -> impl Iterator<Item = &'a ChunkKey> + use<'a> {
        let leaves: Vec<&'a Vec<ChunkKey>> = pages
            .iter()
            .filter_map(|h| match self.pages.get(*h) {
                Some(HeldPage::Leaf(keys)) => Some(keys),
                _ => None,
            })
            .collect();
        leaves.into_iter().flatten()
    }

    /// What to fetch and what is gone, from `root` and the pages `fetched` of it alone.
    pub fn plan(&self, root: &Manifest, fetched: &Fetched) -> Plan {
        let refs = || fetched.leaves.iter().flat_map(|(_, p)| &p.chunks);
        let listed: BTreeSet<&ChunkKey> = refs().map(|r| &r.key).collect();
        let fetch = refs()
            .filter(|r| self.chunks.get(&r.key) != Some(&r.hash))
            .map(|r| r.hash)
            .collect();
        let removed = self
            .keys(&self.dropped(root, fetched))
            .filter(|k| !listed.contains(k))
            .cloned()
            .collect();
        Plan { fetch, removed }
    }

    /// Takes `root` (with the pages `fetched` of it) as held.
    pub fn apply(&mut self, root: &Manifest, fetched: Fetched) {
        let dropped: Vec<ChunkHash> = self.dropped(root, &fetched).into_iter().cloned().collect();
        let gone: Vec<ChunkKey> = self
            .keys(&dropped.iter().collect::<Vec<_>>())
            .cloned()
            .collect();
        for key in &gone {
            self.chunks.remove(key);
        }
        for hash in &dropped {
            self.pages.remove(hash);
        }
        for (hash, page) in fetched.index {
            let pages = page.pages.into_iter().map(|p| p.hash).collect();
            self.pages.insert(hash, HeldPage::Index(pages));
        }
        for (hash, page) in fetched.leaves {
            let mut keys = Vec::with_capacity(page.chunks.len());
            for r in page.chunks {
                keys.push(r.key.clone());
                self.chunks.insert(r.key, r.hash);
            }
            self.pages.insert(hash, HeldPage::Leaf(keys));
        }
        self.root = root.pages.iter().map(|p| p.hash).collect();
    }

    #[cfg(test)]
    pub fn chunks(&self) -> &BTreeMap<ChunkKey, ChunkHash> {
        &self.chunks
    }

    #[cfg(test)]
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }
}

impl Descent {
    /// The pages to fetch next, by hash; empty once the walk is done.
    pub fn wanted(&self) -> &[ChunkHash] {
        &self.wanted
    }

    /// What the pages wanted are, for errors.
    pub fn what(&self) -> &'static str {
        if self.level > 0 { "index page" } else { "page" }
    }

    /// Takes the bodies of the pages wanted, in order, checked against their hashes;
    /// wants the pages below them that `held` lacks.
    pub fn take<B: AsRef<[u8]>>(
        &mut self,
        held: &Held,
        bodies: impl IntoIterator<Item = B>,
    ) -> Result<(), SnapshotError> {
        let wanted = std::mem::take(&mut self.wanted);
        for (hash, body) in wanted.into_iter().zip(bodies) {
            if self.level > 0 {
                let page = IndexPage::decode(&hash, body.as_ref())?;
                self.wanted.extend(held.lacking(&page.pages));
                self.fetched.index.insert(hash, page);
            } else {
                let page = Page::decode(&hash, body.as_ref())?;
                self.fetched.leaves.push((hash, page));
            }
        }
        self.level = self.level.saturating_sub(1);
        Ok(())
    }

    /// The pages fetched: index pages and leaf pages.
    pub fn finish(self) -> Fetched {
        self.fetched
    }
}

impl Fetched {
    /// Pages fetched, index and leaf.
    pub fn len(&self) -> usize {
        self.index.len() + self.leaves.len()
    }
}

#[cfg(test)]
mod tests;
