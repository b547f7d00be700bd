use super::*;
use shoal_proto::model::ServiceKey;
use shoal_proto::snapshot::{ChunkRef, Pages};

fn key(i: usize) -> ChunkKey {
    let namespace = format!("ns-{}", i % 10);
    ChunkKey::Endpoints(ServiceKey {
        hostname: format!("svc-{i}.{namespace}.svc.cluster.local"),
        namespace,
    })
}

fn hash(i: usize, generation: u32) -> ChunkHash {
    ChunkHash::of(format!("{i}/{generation}").as_bytes())
}

/// What one pull fetched.
#[derive(Debug, PartialEq, Eq)]
struct Pulled {
    plan: Plan,
    /// Pages fetched, index and leaf.
    pages: usize,
    /// Store round trips for pages.
    round_trips: usize,
}

/// Pulls the snapshot of `refs` into `held` as the puller does, from a store holding its
/// pages by hash.
fn pull(held: &mut Held, refs: &BTreeMap<ChunkKey, ChunkHash>) -> Pulled {
    let pages = Pages::of(refs.iter().map(|(key, hash)| ChunkRef {
        key: key.clone(),
        hash: *hash,
    }))
    .unwrap();
    let store: HashMap<&ChunkHash, &[u8]> =
        pages.encoded().map(|(h, b)| (h, b.as_slice())).collect();
    let root = pages.manifest(1, 0);
    let mut descent = held.descend(&root);
    let mut round_trips = 0;
    while !descent.wanted().is_empty() {
        round_trips += 1;
        let bodies: Vec<&[u8]> = descent.wanted().iter().map(|h| store[h]).collect();
        descent.take(held, bodies).unwrap();
    }
    let fetched = descent.finish();
    let fetched_pages = fetched.len();
    let plan = held.plan(&root, &fetched);
    held.apply(&root, fetched);
    assert_eq!(held.chunks(), refs, "held is the snapshot");
    assert_eq!(
        held.page_count(),
        pages.encoded().count(),
        "no page left over"
    );
    Pulled {
        plan,
        pages: fetched_pages,
        round_trips,
    }
}

#[test]
fn only_changed_pages_and_chunks_are_fetched() {
    let mut refs: BTreeMap<ChunkKey, ChunkHash> =
        (0..1_000).map(|i| (key(i), hash(i, 0))).collect();
    let mut held = Held::default();
    let first = pull(&mut held, &refs);
    assert_eq!(
        (
            first.plan.fetch.len(),
            first.plan.removed.len(),
            first.pages
        ),
        (1_000, 0, 16)
    );

    // The same snapshot again: nothing.
    let again = pull(&mut held, &refs);
    assert_eq!((again.plan, again.pages), (Plan::default(), 0));

    // One chunk changed: its page and itself.
    refs.insert(key(7), hash(7, 1));
    let one = pull(&mut held, &refs);
    assert_eq!(
        (one.plan.fetch, one.plan.removed, one.pages),
        (vec![hash(7, 1)], vec![], 1)
    );

    // One removed, one added (same page count): no chunk fetched for the removal.
    refs.remove(&key(3));
    refs.insert(key(1_000), hash(1_000, 0));
    let moved = pull(&mut held, &refs);
    assert_eq!(moved.plan.fetch, [hash(1_000, 0)]);
    assert_eq!(moved.plan.removed, [key(3)]);
    assert!(moved.pages <= 2, "{} pages", moved.pages);
}

/// With index pages (10k chunks: 256 leaf pages under 4 index pages), one change costs
/// one page per level; the first pull one round trip per level.
#[test]
fn one_change_under_index_pages_fetches_one_page_per_level() {
    let mut refs: BTreeMap<ChunkKey, ChunkHash> =
        (0..10_000).map(|i| (key(i), hash(i, 0))).collect();
    let mut held = Held::default();
    let first = pull(&mut held, &refs);
    assert_eq!((first.pages, first.round_trips), (4 + 256, 2));
    assert_eq!(first.plan.fetch.len(), 10_000);

    refs.insert(key(4_321), hash(4_321, 1));
    let one = pull(&mut held, &refs);
    assert_eq!(
        (one.plan.fetch, one.plan.removed, one.pages, one.round_trips),
        (vec![hash(4_321, 1)], vec![], 2, 2)
    );

    // A key leaves and another arrives: at most two paths, only the new chunk fetched.
    refs.remove(&key(17));
    refs.insert(key(10_000), hash(10_000, 0));
    let moved = pull(&mut held, &refs);
    assert_eq!(moved.plan.fetch, [hash(10_000, 0)]);
    assert_eq!(moved.plan.removed, [key(17)]);
    assert!(moved.pages <= 4, "{} pages", moved.pages);
}

#[test]
fn a_new_page_count_refetches_pages_but_not_chunks() {
    let mut refs: BTreeMap<ChunkKey, ChunkHash> = (0..64).map(|i| (key(i), hash(i, 0))).collect();
    let mut held = Held::default();
    pull(&mut held, &refs);
    // 65 chunks: two pages, every key moved into one of them.
    refs.insert(key(64), hash(64, 0));
    let grown = pull(&mut held, &refs);
    assert_eq!(grown.pages, 2);
    assert_eq!(grown.plan.fetch, [hash(64, 0)]);
    assert!(grown.plan.removed.is_empty());
    // Back to one page: key 0 and key 64 leave.
    refs.remove(&key(0));
    refs.remove(&key(64));
    let shrunk = pull(&mut held, &refs);
    assert_eq!(shrunk.pages, 1);
    assert!(shrunk.plan.fetch.is_empty());
    let removed: BTreeSet<ChunkKey> = shrunk.plan.removed.into_iter().collect();
    assert_eq!(removed, BTreeSet::from([key(0), key(64)]));
}

/// Across the count where an index level appears (4,096 → 4,097 chunks: 64 → 128 leaf
/// pages under 2 index pages) and back, no chunk is fetched again and none is lost.
#[test]
fn an_index_level_appearing_or_leaving_refetches_pages_but_not_chunks() {
    let mut refs: BTreeMap<ChunkKey, ChunkHash> =
        (0..4_096).map(|i| (key(i), hash(i, 0))).collect();
    let mut held = Held::default();
    assert_eq!(pull(&mut held, &refs).round_trips, 1);
    refs.insert(key(4_096), hash(4_096, 0));
    let grown = pull(&mut held, &refs);
    assert_eq!((grown.pages, grown.round_trips), (2 + 128, 2));
    assert_eq!(grown.plan.fetch, [hash(4_096, 0)]);
    assert!(grown.plan.removed.is_empty());
    refs.remove(&key(4_096));
    refs.remove(&key(5));
    let shrunk = pull(&mut held, &refs);
    assert_eq!((shrunk.pages, shrunk.round_trips), (64, 1));
    assert!(shrunk.plan.fetch.is_empty());
    let removed: BTreeSet<ChunkKey> = shrunk.plan.removed.into_iter().collect();
    assert_eq!(removed, BTreeSet::from([key(5), key(4_096)]));
}

#[test]
fn an_empty_snapshot_removes_everything() {
    let refs: BTreeMap<ChunkKey, ChunkHash> = (0..100).map(|i| (key(i), hash(i, 0))).collect();
    let mut held = Held::default();
    pull(&mut held, &refs);
    let empty = pull(&mut held, &BTreeMap::new());
    assert_eq!(empty.pages, 0);
    assert_eq!(empty.plan.removed.len(), 100);
}
