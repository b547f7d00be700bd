//! Bounded caches of generated, encoded resources, shared by every proxy that needs the
//! same output.
//!
//! Keys say exactly what an output depends on (a scope and its index generation, an
//! interception mode, a cluster's service). What a key cannot capture cheaply (the endpoint
//! chunk a cluster was built from) is checked on lookup by the caller's `fresh` test, so a
//! stale entry is rebuilt, never served. Entries of older generations are never asked for
//! again and age out: each cache holds at most `capacity` entries, evicting the least
//! recently used eighth when full.

use super::XdsResource;
use bytes::Bytes;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Counters of one cache, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TypeStats {
    pub hits: u64,
    pub misses: u64,
    pub entries: usize,
}

/// Counters of every cache of a [`super::Generator`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub clusters: TypeStats,
    pub endpoints: TypeStats,
    pub listeners: TypeStats,
    pub routes: TypeStats,
    /// Encoded response bodies shared between streams.
    pub encoded: TypeStats,
}

struct Lru<K, V> {
    /// foldhash, seeded per process (keys hold names proxies send): every response of
    /// every stream looks these caches up.
    map: HashMap<K, (V, u64), foldhash::fast::RandomState>,
    tick: u64,
    capacity: usize,
}

impl<K: Hash + Eq, V> Lru<K, V> {
    fn get(&mut self, key: &K) -> Option<&V> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(key).map(|(v, used)| {
            *used = tick;
            &*v
        })
    }

    fn insert(&mut self, key: K, value: V) {
        if self.map.len() >= self.capacity && !self.map.contains_key(&key) {
            self.evict();
        }
        self.tick += 1;
        self.map.insert(key, (value, self.tick));
    }

    /// Drops the least recently used eighth (at least one entry).
    fn evict(&mut self) {
        let n = (self.capacity / 8).max(1).min(self.map.len());
        if n == 0 {
            return;
        }
        let mut ticks: Vec<u64> = self.map.values().map(|(_, t)| *t).collect();
        let (_, cutoff, _) = ticks.select_nth_unstable(n - 1);
        let cutoff = *cutoff;
        self.map.retain(|_, (_, t)| *t > cutoff);
    }
}

/// One cache of generated output, with hit and miss counters.
pub struct TypeCache<K, V> {
    inner: Mutex<Lru<K, V>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl<K: Hash + Eq, V: Clone> TypeCache<K, V> {
    pub fn new(capacity: usize) -> Self {
        TypeCache {
            inner: Mutex::new(Lru {
                map: HashMap::default(),
                tick: 0,
                capacity: capacity.max(1),
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The cached value for `key` when `fresh` accepts it; otherwise `build`s (outside the
    /// lock, so a slow build never blocks other keys), stores and returns a new one.
    /// Two callers racing on one key may both build; the results are equal.
    pub fn get_or_build(&self, key: K, fresh: impl Fn(&V) -> bool, build: impl FnOnce() -> V) -> V {
        if let Some(v) = self.lock().get(&key).filter(|v| fresh(v)).cloned() {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return v;
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let v = build();
        self.lock().insert(key, v.clone());
        v
    }

    pub fn stats(&self) -> TypeStats {
        TypeStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.lock().map.len(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru<K, V>> {
        // A panic while holding the lock cannot leave the map inconsistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One cached encoding: its kind, the resources it encodes, the bytes (behind one `Arc`,
/// so a hit costs a reference count, not a copy of the list).
type Encoding = Arc<(u64, Box<[Arc<XdsResource>]>, Bytes)>;

/// Encodings of lists of shared resources (the resource fields of a response), keyed by
/// the resources themselves: every stream that sends the same list (all the proxies of a
/// scope, at initial sync and at each push) gets the same `Bytes`, encoded once. An entry
/// holds its resources, so their addresses, which the key compares, cannot be reused
/// while it lives.
pub struct EncodedCache(TypeCache<u64, Encoding>);

impl EncodedCache {
    pub fn new(capacity: usize) -> Self {
        EncodedCache(TypeCache::new(capacity))
    }

    /// The encoding of `resources` (in this order) under `kind` (which encoding it is),
    /// from the cache or from `encode`, outside the lock.
    pub fn get_or_encode(
        &self,
        kind: u64,
        resources: &[Arc<XdsResource>],
        encode: impl FnOnce(&[Arc<XdsResource>]) -> Bytes,
    ) -> Bytes {
        // The key hashes the resources' addresses, not what a proxy sends: no seed needed.
        let mut hasher = foldhash::fast::FixedState::default().build_hasher();
        kind.hash(&mut hasher);
        for r in resources {
            Arc::as_ptr(r).hash(&mut hasher);
        }
        // On a (64-bit) hash collision the held list differs: rebuilt, and the newer list
        // takes the slot; still correct.
        let same = |held: &Encoding| {
            held.0 == kind
                && held.1.len() == resources.len()
                && held.1.iter().zip(resources).all(|(a, b)| Arc::ptr_eq(a, b))
        };
        let held = self.0.get_or_build(hasher.finish(), same, || {
            let bytes = encode(resources);
            Arc::new((kind, resources.to_vec().into_boxed_slice(), bytes))
        });
        held.2.clone()
    }

    pub fn stats(&self) -> TypeStats {
        self.0.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_are_shared_by_identity_and_order() {
        let r = |n: &str| Arc::new(XdsResource::new(n.into(), "t", vec![1]));
        let (a, b) = (r("a"), r("b"));
        let c: EncodedCache = EncodedCache::new(4);
        let encode = |rs: &[Arc<XdsResource>]| {
            Bytes::from(rs.iter().map(|r| r.name.clone()).collect::<String>())
        };
        let first = c.get_or_encode(0, &[a.clone(), b.clone()], encode);
        assert_eq!(first, "ab");
        let again = c.get_or_encode(0, &[a.clone(), b.clone()], |_| unreachable!());
        assert_eq!(again.as_ptr(), first.as_ptr(), "the same bytes, not a copy");
        // Another order, another kind, an equal resource that is not the same one: encoded.
        assert_eq!(c.get_or_encode(0, &[b.clone(), a.clone()], encode), "ba");
        assert_eq!(c.get_or_encode(1, &[a.clone(), b.clone()], encode), "ab");
        assert_eq!(c.get_or_encode(0, &[a.clone(), r("b")], encode), "ab");
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.entries), (1, 4, 4));
    }

    #[test]
    fn hits_misses_and_freshness() {
        let c: TypeCache<&str, u32> = TypeCache::new(4);
        assert_eq!(c.get_or_build("a", |_| true, || 1), 1);
        assert_eq!(c.get_or_build("a", |_| true, || 2), 1);
        // A stale entry is rebuilt.
        assert_eq!(c.get_or_build("a", |v| *v != 1, || 3), 3);
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.entries), (1, 2, 1));
    }

    #[test]
    fn evicts_least_recently_used() {
        let c: TypeCache<u32, u32> = TypeCache::new(8);
        for k in 0..8 {
            c.get_or_build(k, |_| true, || k);
        }
        // Touch 0 so that 1 is the oldest.
        c.get_or_build(0, |_| true, || 100);
        c.get_or_build(8, |_| true, || 8);
        assert_eq!(c.stats().entries, 8);
        assert_eq!(
            c.get_or_build(0, |_| true, || 100),
            0,
            "recently used survives"
        );
        assert_eq!(
            c.get_or_build(1, |_| true, || 101),
            101,
            "oldest was evicted"
        );
    }
}
