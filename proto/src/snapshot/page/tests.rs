use super::*;
use crate::model::ServiceKey;
use crate::snapshot::Encoded;
use std::collections::BTreeMap;

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

/// `services` endpoint chunks and 10 namespace chunks, as meshgen's meshes have.
fn mesh_refs(services: usize) -> Vec<ChunkRef> {
    (0..10)
        .map(|ns| ChunkKey::Namespace(format!("ns-{ns}")))
        .chain((0..services).map(key))
        .enumerate()
        .map(|(i, key)| ChunkRef {
            key,
            hash: hash(i, 0),
        })
        .collect()
}

#[test]
fn page_count_is_the_smallest_power_of_two_for_the_target() {
    let cases = [
        (0, 1),
        (1, 1),
        (64, 1),
        (65, 2),
        (128, 2),
        (129, 4),
        (1_010, 16),
        (10_010, 256),
        (16_384, 256),
        (16_385, 512),
    ];
    for (chunks, pages) in cases {
        assert_eq!(page_count(chunks), pages, "{chunks} chunks");
    }
}

/// The partition is part of the format: a page index must not depend on the process,
/// the build or the platform. These values are pinned; changing them is a format change.
#[test]
fn the_partition_is_stable() {
    let pinned = [
        (ChunkKey::Namespace("default".into()), 256, PINNED[0]),
        (key(1), 256, PINNED[1]),
        (key(9_999), 256, PINNED[2]),
        (key(42), 1 << 20, PINNED[3]),
    ];
    for (key, pages, index) in pinned {
        assert_eq!(page_of(&key, pages), index, "{key:?} among {pages}");
    }
    // Doubling the count splits each page in two (the low bits grow by one).
    for i in 0..1_000 {
        assert_eq!(page_of(&key(i), 512) % 256, page_of(&key(i), 256));
    }
}

const PINNED: [u32; 4] = [154, 105, 193, 187_903];

#[test]
fn pages_hold_a_bounded_number_of_refs() {
    for services in [0, 10, 100, 1_000, 5_000, 10_000, 20_000] {
        let pages = Pages::of(mesh_refs(services)).unwrap();
        let chunks = services + 10;
        assert_eq!(pages.len(), chunks);
        assert_eq!(pages.page_count(), page_count(chunks));
        let sizes: Vec<usize> = pages.levels()[0]
            .iter()
            .map(|(h, b)| Page::decode(h, b).unwrap().chunks.len())
            .collect();
        assert_eq!(sizes.iter().sum::<usize>(), chunks, "every ref in one page");
        let max = sizes.iter().copied().max().unwrap_or(0);
        assert!(
            max <= 2 * PAGE_TARGET,
            "{services} services: a page of {max}"
        );
    }
}

#[test]
fn one_changed_key_re_encodes_its_page_and_the_index_page_above() {
    let refs = mesh_refs(10_000);
    let mut pages = Pages::of(refs.clone()).unwrap();
    assert_eq!((pages.page_count(), pages.depth()), (256, 1));
    let before = pages.refs();
    assert_eq!(
        before.len(),
        4,
        "the root lists 4 index pages of 64 leaf pages"
    );

    let changed = &refs[1_234];
    let leaf = page_of(&changed.key, 256);
    pages.insert(changed.key.clone(), hash(1_234, 1));
    let new = pages.seal().unwrap();
    assert_eq!(new.len(), 2, "one leaf page and one index page re-encoded");
    let after = pages.refs();
    let differ: Vec<u32> = before
        .iter()
        .zip(&after)
        .filter(|(a, b)| a != b)
        .map(|(a, _)| a.index)
        .collect();
    assert_eq!(differ, [leaf / FANOUT]);
    let page = Page::decode(&new[0].0, &new[0].1).unwrap();
    assert!(page.chunks.contains(&ChunkRef {
        key: changed.key.clone(),
        hash: hash(1_234, 1),
    }));
    assert!(page.chunks.is_sorted_by_key(|r| r.key.clone()));
    let index = IndexPage::decode(&new[1].0, &new[1].1).unwrap();
    assert_eq!(after[differ[0] as usize].hash, new[1].0);
    assert!(index.pages.contains(&PageRef {
        index: leaf,
        hash: new[0].0,
    }));
    assert_eq!(
        pages.path(&changed.key),
        [&new[0], &new[1]],
        "the path is what the change re-encoded"
    );

    // Setting a hash it already holds changes nothing.
    pages.insert(changed.key.clone(), hash(1_234, 1));
    assert!(pages.seal().unwrap().is_empty());
    assert_eq!(pages.refs(), after);
}

#[test]
fn levels_grow_by_one_each_time_the_pages_outgrow_the_fanout() {
    let cases: [(u32, &[u32]); 7] = [
        (1, &[1]),
        (64, &[64]),
        (128, &[128, 2]),
        (4_096, &[4_096, 64]),
        (8_192, &[8_192, 128, 2]),
        (262_144, &[262_144, 4_096, 64]),
        (1 << 31, &[1 << 31, 1 << 25, 1 << 19, 1 << 13, 128, 2]),
    ];
    for (pages, widths) in cases {
        assert_eq!(level_widths(pages), widths, "{pages} pages");
    }
}

/// Every page a change rewrites is bounded, whatever the mesh: a leaf page holds ~64
/// refs, an index page and the root at most `FANOUT`.
#[test]
fn every_page_is_bounded_at_every_level() {
    for services in [1_000, 10_000, 100_000] {
        let pages = Pages::of(mesh_refs(services)).unwrap();
        let levels = pages.levels();
        assert_eq!(levels.len(), usize::from(pages.depth()) + 1);
        assert_eq!(
            levels[0].len() as u32,
            pages.page_count(),
            "no leaf is empty"
        );
        for (hash, bytes) in levels.iter().skip(1).flatten() {
            let index = IndexPage::decode(hash, bytes).unwrap();
            assert!(index.pages.len() <= FANOUT as usize);
            assert!(index.pages.is_sorted_by_key(|p| p.index));
        }
        let root = pages.manifest(1, 0);
        assert!(root.pages.len() <= FANOUT as usize, "{services}: root");
        assert_eq!(root.pages.len(), levels.last().unwrap().len());
        let largest = |level: &Vec<&Encoded>| level.iter().map(|(_, b)| b.len()).max();
        let sizes: Vec<usize> = levels.iter().filter_map(largest).collect();
        let path: usize = sizes.iter().sum::<usize>() + root.encode().unwrap().len();
        assert!(path < 12 * 1024, "{services} services: pages {sizes:?}");
    }
}
#[test]
fn incremental_pages_equal_pages_built_from_scratch() {
    let mut pages = Pages::new();
    let mut held: BTreeMap<ChunkKey, ChunkHash> = BTreeMap::new();
    // Grow across several page counts (1 → 2 → 4 → 8 → … → 128, when an index level
    // appears), then shrink back, changing hashes on the way.
    let steps: Vec<(usize, usize, u32)> = vec![
        (0, 10, 0),
        (10, 64, 0),
        (64, 65, 0),
        (0, 65, 1),
        (65, 300, 0),
        (100, 120, 2),
        (300, 4_096, 0),
        (4_096, 4_097, 0),
        (2_000, 2_001, 3),
        (4_097, 5_000, 0),
    ];
    for (from, to, generation) in steps {
        for i in from..to {
            pages.insert(key(i), hash(i, generation));
            held.insert(key(i), hash(i, generation));
        }
        pages.seal().unwrap();
        check(&pages, &held);
    }
    for end in [4_097, 4_096, 250, 129, 128, 64, 1, 0] {
        for i in end..5_000 {
            pages.remove(&key(i));
            held.remove(&key(i));
        }
        pages.seal().unwrap();
        check(&pages, &held);
    }
    assert!(pages.is_empty());
    assert!(pages.refs().is_empty(), "no page for no chunk");
}

fn check(pages: &Pages, held: &BTreeMap<ChunkKey, ChunkHash>) {
    let scratch = Pages::of(held.iter().map(|(key, hash)| ChunkRef {
        key: key.clone(),
        hash: *hash,
    }))
    .unwrap();
    assert_eq!(pages.len(), held.len());
    assert_eq!(pages.page_count(), page_count(held.len()));
    assert_eq!(pages.depth(), scratch.depth());
    assert_eq!(pages.refs(), scratch.refs(), "{} refs", held.len());
    assert_eq!(pages.levels(), scratch.levels(), "{} refs", held.len());
}

#[test]
fn a_new_page_count_rewrites_every_page() {
    let mut pages = Pages::of(mesh_refs(54)).unwrap();
    assert_eq!((pages.len(), pages.page_count()), (64, 1));
    pages.insert(key(54), hash(54, 0));
    let new = pages.seal().unwrap();
    assert_eq!(pages.page_count(), 2);
    assert_eq!(new.len(), 2, "both pages of the new partition are new");
}

#[test]
fn page_round_trip_and_hash_check() {
    let page = Page {
        chunks: mesh_refs(3),
    };
    let (hash, bytes) = page.encode().unwrap();
    assert_eq!(bytes[0], crate::snapshot::FORMAT_VERSION);
    assert_eq!(Page::decode(&hash, &bytes).unwrap(), page);
    // Sealed pages are encoded from the refs in place: the very same bytes.
    let pages = Pages::of(page.chunks.clone()).unwrap();
    let sealed: Vec<_> = pages.encoded().collect();
    assert_eq!(sealed.len(), 1);
    assert_eq!(
        (&sealed[0].0, sealed[0].1.as_slice()),
        (&hash, bytes.as_slice())
    );
    assert!(matches!(
        Page::decode(&ChunkHash::of(b"other"), &bytes),
        Err(SnapshotError::Corrupt(_))
    ));
}

#[test]
fn the_manifest_lists_the_sealed_pages() {
    let pages = Pages::of(mesh_refs(1_000)).unwrap();
    let manifest = pages.manifest(9, 1);
    assert_eq!((manifest.version, manifest.depth), (9, 0));
    assert_eq!(manifest.pages, pages.refs());
    assert!(manifest.pages.is_sorted_by_key(|p| p.index));
    let hashes: Vec<&ChunkHash> = pages.encoded().map(|(h, _)| h).collect();
    assert_eq!(
        manifest.pages.iter().map(|p| &p.hash).collect::<Vec<_>>(),
        hashes
    );
}

#[test]
fn the_manifest_of_a_larger_mesh_lists_the_index_pages() {
    let pages = Pages::of(mesh_refs(10_000)).unwrap();
    let manifest = pages.manifest(9, 1);
    assert_eq!(manifest.depth, 1);
    let levels = pages.levels();
    assert_eq!(
        manifest.pages.iter().map(|p| &p.hash).collect::<Vec<_>>(),
        levels[1].iter().map(|(h, _)| h).collect::<Vec<_>>()
    );
    // Each index page lists the leaf pages of its range, which list every ref once.
    let mut listed = 0;
    for (root_ref, (hash, bytes)) in manifest.pages.iter().zip(&levels[1]) {
        let index = IndexPage::decode(hash, bytes).unwrap();
        for page in &index.pages {
            assert_eq!(page.index / FANOUT, root_ref.index);
            let (_, bytes) = levels[0]
                .iter()
                .find(|(h, _)| *h == page.hash)
                .expect("a leaf page");
            listed += Page::decode(&page.hash, bytes).unwrap().chunks.len();
        }
    }
    assert_eq!(listed, 10_010);
}
