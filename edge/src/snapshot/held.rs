//! What an edge holds of its snapshot, and what a new root manifest asks it to fetch.
//! I/O-free.
//!
//! ```text
//!  root pages ──(index, hash) ≠ held──► stale pages: fetch and decode these only
//!  stale pages ──ref (key, hash) ≠ held──► chunks to fetch
//!  keys the held versions of stale (or dropped) pages listed, in no stale page now
//!                                      ──► keys removed
//! ```
//!
//! A page whose hash is unchanged lists exactly the keys it listed before (content
//! addressing), so keys can only have moved between stale pages: the rule holds even
//! when the page count changed and every page is new.

use shoal_proto::snapshot::{ChunkHash, ChunkKey, Manifest, Page, PageRef};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Default)]
pub(super) struct Held {
    /// Page index → its hash and the keys it lists.
    pages: BTreeMap<u32, (ChunkHash, Vec<ChunkKey>)>,
    chunks: BTreeMap<ChunkKey, ChunkHash>,
}

/// What a new snapshot asks of the store, given its stale pages.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Plan {
    /// Chunks whose hash the edge does not hold, by key.
    pub fetch: Vec<ChunkHash>,
    /// Keys the new snapshot no longer has.
    pub removed: Vec<ChunkKey>,
}

impl Held {
    /// The pages of `root` this edge does not hold.
    pub fn stale_pages<'m>(&self, root: &'m Manifest) -> Vec<&'m PageRef> {
        root.pages
            .iter()
            .filter(|p| self.pages.get(&p.index).is_none_or(|(h, _)| *h != p.hash))
            .collect()
    }

    /// Held pages that `root` replaces or drops.
    fn replaced<'a>(
        &'a self,
        stale: &'a BTreeMap<u32, Page>,
        root: &'a Manifest,
    ) -> impl Iterator<Item = &'a ChunkKey> {
        let listed: BTreeSet<u32> = root.pages.iter().map(|p| p.index).collect();
        self.pages
            .iter()
            .filter(move |(index, _)| stale.contains_key(index) || !listed.contains(index))
            .flat_map(|(_, (_, keys))| keys)
    }

    /// What to fetch and what is gone, from `stale` (every stale page of `root`, decoded,
    /// by index) alone.
    pub fn plan(&self, root: &Manifest, stale: &BTreeMap<u32, Page>) -> Plan {
        let listed: BTreeSet<&ChunkKey> = stale
            .values()
            .flat_map(|p| p.chunks.iter().map(|r| &r.key))
            .collect();
        let fetch = stale
            .values()
            .flat_map(|p| &p.chunks)
            .filter(|r| self.chunks.get(&r.key) != Some(&r.hash))
            .map(|r| r.hash.clone())
            .collect();
        let removed = self
            .replaced(stale, root)
            .filter(|k| !listed.contains(k))
            .cloned()
            .collect();
        Plan { fetch, removed }
    }

    /// Takes `root` (with its stale pages) as held.
    pub fn apply(&mut self, root: &Manifest, stale: BTreeMap<u32, Page>) {
        let gone: Vec<ChunkKey> = self.replaced(&stale, root).cloned().collect();
        for key in &gone {
            self.chunks.remove(key);
        }
        let listed: BTreeSet<u32> = root.pages.iter().map(|p| p.index).collect();
        self.pages.retain(|index, _| listed.contains(index));
        let hashes: BTreeMap<u32, &ChunkHash> =
            root.pages.iter().map(|p| (p.index, &p.hash)).collect();
        for (index, page) in stale {
            let Some(hash) = hashes.get(&index) else {
                continue;
            };
            let mut keys = Vec::with_capacity(page.chunks.len());
            for r in page.chunks {
                keys.push(r.key.clone());
                self.chunks.insert(r.key, r.hash);
            }
            self.pages.insert(index, ((*hash).clone(), keys));
        }
    }

    #[cfg(test)]
    pub fn chunks(&self) -> &BTreeMap<ChunkKey, ChunkHash> {
        &self.chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::snapshot::{ChunkRef, Pages};

    fn key(i: usize) -> ChunkKey {
        ChunkKey::Namespace(format!("ns-{i}"))
    }

    fn hash(i: usize, generation: u32) -> ChunkHash {
        ChunkHash::of(format!("{i}/{generation}").as_bytes())
    }

    /// A snapshot of `refs` and its pages, by hash.
    fn snapshot(refs: &BTreeMap<ChunkKey, ChunkHash>) -> (Manifest, BTreeMap<ChunkHash, Page>) {
        let pages = Pages::of(refs.iter().map(|(key, hash)| ChunkRef {
            key: key.clone(),
            hash: hash.clone(),
        }))
        .unwrap();
        let by_hash = pages
            .encoded()
            .map(|(h, b)| (h.clone(), Page::decode(h, b).unwrap()))
            .collect();
        (pages.manifest(1, 0), by_hash)
    }

    /// Pulls `refs` into `held` as the puller does; returns the plan and the pages fetched.
    fn pull(held: &mut Held, refs: &BTreeMap<ChunkKey, ChunkHash>) -> (Plan, usize) {
        let (root, store) = snapshot(refs);
        let stale: BTreeMap<u32, Page> = held
            .stale_pages(&root)
            .into_iter()
            .map(|p| (p.index, store[&p.hash].clone()))
            .collect();
        let fetched = stale.len();
        let plan = held.plan(&root, &stale);
        held.apply(&root, stale);
        assert_eq!(held.chunks(), refs, "held is the snapshot");
        (plan, fetched)
    }

    #[test]
    fn only_changed_pages_and_chunks_are_fetched() {
        let mut refs: BTreeMap<ChunkKey, ChunkHash> =
            (0..1_000).map(|i| (key(i), hash(i, 0))).collect();
        let mut held = Held::default();
        let (plan, pages) = pull(&mut held, &refs);
        assert_eq!(
            (plan.fetch.len(), plan.removed.len(), pages),
            (1_000, 0, 16)
        );

        // The same snapshot again: nothing.
        let (plan, pages) = pull(&mut held, &refs);
        assert_eq!((plan, pages), (Plan::default(), 0));

        // One chunk changed: its page and itself.
        refs.insert(key(7), hash(7, 1));
        let (plan, pages) = pull(&mut held, &refs);
        assert_eq!(
            (plan.fetch, plan.removed, pages),
            (vec![hash(7, 1)], vec![], 1)
        );

        // One removed, one added (same page count): no chunk fetched for the removal.
        refs.remove(&key(3));
        refs.insert(key(1_000), hash(1_000, 0));
        let (plan, pages) = pull(&mut held, &refs);
        assert_eq!(plan.fetch, [hash(1_000, 0)]);
        assert_eq!(plan.removed, [key(3)]);
        assert!(pages <= 2, "{pages} pages");
    }

    #[test]
    fn a_new_page_count_refetches_pages_but_not_chunks() {
        let mut refs: BTreeMap<ChunkKey, ChunkHash> =
            (0..64).map(|i| (key(i), hash(i, 0))).collect();
        let mut held = Held::default();
        pull(&mut held, &refs);
        // 65 chunks: two pages, every key moved into one of them.
        refs.insert(key(64), hash(64, 0));
        let (plan, pages) = pull(&mut held, &refs);
        assert_eq!(pages, 2);
        assert_eq!(plan.fetch, [hash(64, 0)]);
        assert!(plan.removed.is_empty());
        // Back to one page: key 0 and key 64 leave.
        refs.remove(&key(0));
        refs.remove(&key(64));
        let (plan, pages) = pull(&mut held, &refs);
        assert_eq!(pages, 1);
        assert!(plan.fetch.is_empty());
        let removed: BTreeSet<ChunkKey> = plan.removed.into_iter().collect();
        assert_eq!(removed, BTreeSet::from([key(0), key(64)]));
    }

    #[test]
    fn an_empty_snapshot_removes_everything() {
        let refs: BTreeMap<ChunkKey, ChunkHash> = (0..100).map(|i| (key(i), hash(i, 0))).collect();
        let mut held = Held::default();
        pull(&mut held, &refs);
        let (plan, pages) = pull(&mut held, &BTreeMap::new());
        assert_eq!(pages, 0);
        assert_eq!(plan.removed.len(), 100);
    }
}
