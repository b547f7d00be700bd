//! Compact per-stream bookkeeping, for streams counted in tens of thousands per edge.
//!
//! - [`SentSet`]: what a stream last sent of one type, as the shared resources themselves
//!   (the resources live once, in the generator's cache), sorted by name for lookups, in a
//!   list interned like names: the streams of a scope were sent the same resources. SotW keeps its last responses in it, Delta what the proxy
//!   holds (`delta::known`).
//! - [`Names`]: a subscription's resource names, interned: proxies of one scope request
//!   the same EDS/RDS names, so they share one list.

use crate::xds::XdsResource;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The pools' key hash: keyed per process (names come from proxies), and far cheaper than
/// std's SipHash, which every stream's responses and requests would pay.
fn key_hasher() -> &'static foldhash::fast::RandomState {
    static HASHER: OnceLock<foldhash::fast::RandomState> = OnceLock::new();
    HASHER.get_or_init(Default::default)
}

/// Resources last sent on one stream, sorted by name: a list interned like [`Names`], so
/// the streams of one scope, which were sent the same resources, hold one list between
/// them (16 bytes each instead of 8 per resource). A change makes a new list (and
/// interns it): lists change only when a response goes out.
#[derive(Clone, Debug, Default)]
pub struct SentSet(Option<Arc<[Arc<XdsResource>]>>);

/// Equal when they hold the same resources (interned lists: one pointer compared).
impl PartialEq for SentSet {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (self.list(), other.list());
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| Arc::ptr_eq(x, y))
    }
}

type SentPool = Mutex<HashMap<u64, Vec<Weak<[Arc<XdsResource>]>>>>;

fn sent_pool() -> &'static SentPool {
    static POOL: OnceLock<SentPool> = OnceLock::new();
    POOL.get_or_init(Default::default)
}

/// The shared list holding the same resources as `list` (sorted by name, names unique).
fn intern(list: Vec<Arc<XdsResource>>) -> Option<Arc<[Arc<XdsResource>]>> {
    if list.is_empty() {
        return None;
    }
    let mut hasher = key_hasher().build_hasher();
    for r in &list {
        hasher.write_usize(Arc::as_ptr(r) as *const u8 as usize);
    }
    let key = hasher.finish();
    let same = |held: &[Arc<XdsResource>]| {
        held.len() == list.len() && held.iter().zip(&list).all(|(a, b)| Arc::ptr_eq(a, b))
    };
    let mut pool = sent_pool().lock().unwrap_or_else(|e| e.into_inner());
    let bucket = pool.entry(key).or_default();
    bucket.retain(|w| w.strong_count() > 0);
    if let Some(shared) = bucket.iter().filter_map(Weak::upgrade).find(|s| same(s)) {
        return Some(shared);
    }
    let shared: Arc<[Arc<XdsResource>]> = list.into();
    bucket.push(Arc::downgrade(&shared));
    // Keep the pool from holding buckets of dead lists forever.
    if pool.len() > 1024 && pool.len().is_power_of_two() {
        pool.retain(|_, b| b.iter().any(|w| w.strong_count() > 0));
    }
    Some(shared)
}

impl SentSet {
    fn list(&self) -> &[Arc<XdsResource>] {
        self.0.as_deref().unwrap_or(&[])
    }

    fn set(&mut self, list: Vec<Arc<XdsResource>>) {
        self.0 = intern(list);
    }

    pub fn len(&self) -> usize {
        self.list().len()
    }

    /// The resources, sorted by name.
    pub fn resources(&self) -> &[Arc<XdsResource>] {
        self.list()
    }

    pub fn clear(&mut self) {
        self.0 = None;
    }

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.list().binary_search_by(|r| r.name.as_str().cmp(name))
    }

    /// Whether a resource of this name was sent.
    pub fn contains(&self, name: &str) -> bool {
        self.position(name).is_ok()
    }

    /// Whether `resource` (same name and content) was sent.
    pub fn has(&self, resource: &XdsResource) -> bool {
        self.position(&resource.name)
            .is_ok_and(|i| self.list()[i].hash == resource.hash)
    }

    /// Replaces everything with `resources` (a state-of-the-world response; names unique).
    pub fn replace(&mut self, resources: &[Arc<XdsResource>]) {
        let mut list = resources.to_vec();
        // The generator's lists are sorted already.
        if !list.is_sorted_by(|a, b| a.name <= b.name) {
            list.sort_by(|a, b| a.name.cmp(&b.name));
        }
        self.set(list);
    }

    /// The names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.list().iter().map(|r| r.name.as_str())
    }

    /// Inserts or replaces every one of `resources` (names unique among them).
    pub fn insert_all(&mut self, resources: &[&Arc<XdsResource>]) {
        if resources.is_empty() {
            return;
        }
        // Each one replacing a resource of its name (a push of what changed): swapped in
        // place, the order kept without sorting the whole list again.
        let replaced: Option<Vec<usize>> = resources
            .iter()
            .map(|r| self.position(&r.name).ok())
            .collect();
        if let Some(positions) = replaced {
            let mut list = self.list().to_vec();
            for (i, r) in positions.into_iter().zip(resources) {
                list[i] = Arc::clone(r);
            }
            self.set(list);
            return;
        }
        let mut list = Vec::with_capacity(self.len() + resources.len());
        list.extend(self.list().iter().cloned());
        list.extend(resources.iter().map(|r| Arc::clone(r)));
        // Stable: of two equal names, the one just inserted comes second and stays.
        list.sort_by(|a, b| a.name.cmp(&b.name));
        list.dedup_by(|later, earlier| {
            let same = later.name == earlier.name;
            if same {
                std::mem::swap(later, earlier);
            }
            same
        });
        self.set(list);
    }

    #[cfg(test)]
    pub fn insert(&mut self, resource: &Arc<XdsResource>) {
        self.insert_all(&[resource]);
    }

    #[cfg(test)]
    pub fn remove(&mut self, name: &str) {
        self.retain(|n| n != name);
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        if self.list().iter().all(|r| keep(&r.name)) {
            return;
        }
        let list = self
            .list()
            .iter()
            .filter(|r| keep(&r.name))
            .cloned()
            .collect();
        self.set(list);
    }
}

/// A sorted, deduplicated list of names, shared between every stream that asked for the
/// same list.
#[derive(Clone, Debug, Default)]
pub struct Names(Option<Arc<[String]>>);

impl PartialEq for Names {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
            (None, None) => true,
            (a, b) => a.as_deref().unwrap_or(&[]) == b.as_deref().unwrap_or(&[]),
        }
    }
}

type Pool = Mutex<HashMap<u64, Vec<Weak<[String]>>>>;

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(Default::default)
}

impl Names {
    /// Interns `names` (any order, duplicates allowed; `*` dropped). Nothing is copied
    /// when an equal list is interned already (every stream of a scope asks for it).
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Names {
        let mut list: Vec<&str> = names.into_iter().filter(|n| *n != "*").collect();
        if list.is_empty() {
            return Names(None);
        }
        list.sort_unstable();
        list.dedup();
        let key = key_hasher().hash_one(&list);
        let mut pool = pool().lock().unwrap_or_else(|e| e.into_inner());
        let bucket = pool.entry(key).or_default();
        bucket.retain(|w| w.strong_count() > 0);
        if let Some(shared) = bucket
            .iter()
            .filter_map(Weak::upgrade)
            .find(|s| s.iter().map(String::as_str).eq(list.iter().copied()))
        {
            return Names(Some(shared));
        }
        let shared: Arc<[String]> = list.iter().map(|n| n.to_string()).collect();
        bucket.push(Arc::downgrade(&shared));
        // Keep the pool from holding buckets of dead lists forever.
        if pool.len() > 1024 && pool.len().is_power_of_two() {
            pool.retain(|_, b| b.iter().any(|w| w.strong_count() > 0));
        }
        Names(Some(shared))
    }

    pub fn iter(&self) -> impl Iterator<Item = &String> {
        self.as_slice().iter()
    }

    /// The names, sorted.
    pub fn as_slice(&self) -> &[String] {
        self.0.as_deref().unwrap_or(&[])
    }

    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |l| l.len())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0
            .as_ref()
            .is_some_and(|l| l.binary_search_by(|n| n.as_str().cmp(name)).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_lists_share_one_allocation() {
        let a = Names::new(["b", "a", "a"]);
        let b = Names::new(["a", "b"]);
        assert_eq!(a, b);
        assert!(Arc::ptr_eq(a.0.as_ref().unwrap(), b.0.as_ref().unwrap()));
        assert!(a.contains("a") && !a.contains("c"));
        assert_eq!(Names::new(["*"]), Names::default());
    }

    #[test]
    fn sent_set_tracks_by_name_and_content() {
        let r = |n: &str, v: &[u8]| Arc::new(XdsResource::new(n.into(), "t", v.to_vec()));
        let mut s = SentSet::default();
        s.replace(&[r("b", b"1"), r("a", b"1")]);
        assert!(s.has(&r("a", b"1")));
        assert!(!s.has(&r("a", b"2")));
        s.insert(&r("a", b"2"));
        assert!(s.has(&r("a", b"2")));
        s.remove("a");
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn streams_sent_the_same_resources_share_one_list() {
        let r = |n: &str| Arc::new(XdsResource::new(n.into(), "t", vec![1]));
        let (a, b) = (r("a"), r("b"));
        let (mut s1, mut s2) = (SentSet::default(), SentSet::default());
        s1.replace(&[b.clone(), a.clone()]);
        s2.insert_all(&[&a, &b]);
        assert!(Arc::ptr_eq(s1.0.as_ref().unwrap(), s2.0.as_ref().unwrap()));
        // A change is a list of its own; undone, shared again.
        s2.remove("a");
        assert_eq!(s2.names().collect::<Vec<_>>(), ["b"]);
        assert_eq!(s1.len(), 2);
        s2.insert(&a);
        assert!(Arc::ptr_eq(s1.0.as_ref().unwrap(), s2.0.as_ref().unwrap()));
        s2.retain(|_| false);
        assert_eq!((s2.len(), s2.0.is_none()), (0, true));
    }

    #[test]
    fn insert_all_replaces_by_name_and_keeps_order() {
        let r = |n: &str, v: &[u8]| Arc::new(XdsResource::new(n.into(), "t", v.to_vec()));
        let mut s = SentSet::default();
        s.insert_all(&[&r("c", b"1"), &r("a", b"1")]);
        s.insert_all(&[&r("b", b"1"), &r("a", b"2"), &r("d", b"1")]);
        s.insert_all(&[&r("c", b"2")]);
        s.insert_all(&[&r("0", b"1")]);
        assert_eq!(s.names().collect::<Vec<_>>(), ["0", "a", "b", "c", "d"]);
        assert!(s.has(&r("a", b"2")) && s.has(&r("c", b"2")) && s.has(&r("d", b"1")));
        // Only replacements, in no order.
        s.insert_all(&[&r("d", b"2"), &r("a", b"3")]);
        assert_eq!(s.names().collect::<Vec<_>>(), ["0", "a", "b", "c", "d"]);
        assert!(s.has(&r("a", b"3")) && s.has(&r("d", b"2")) && s.has(&r("b", b"1")));
    }
}
