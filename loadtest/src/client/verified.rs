//! Each distinct response is decoded and verified once.
//!
//! Proxies of one scope receive the same resources, byte for byte: the first copy of a
//! response is decoded into its Envoy types and checked exactly as before
//! ([`super::decode`]); every later copy is recognised by a 128-bit hash of its encoded
//! resources ([`crate::wire::scan`]: XXH3, several times cheaper per byte than BLAKE3 on
//! these many small bodies, see `loadtest/benches/hash.rs`) and only records the outcome
//! kept here: names, references, versions, the marker. A response that does not verify is
//! never cached, so every copy of it is decoded and NACKed with its own error.
//!
//! The cache is bounded: per shard, two generations of at most `capacity / 32` entries;
//! when the current one is full the previous one is dropped (counted as evictions) and
//! the current one becomes the previous. A hit in the previous generation moves forward.

use super::decode::{self, DecodeError, Kind, Marker, Summary};
use super::index::DepIndex;
use crate::wire::RawAny;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};

/// Shards of the cache (a power of two), so a million proxies do not queue on one lock.
const SHARDS: usize = 16;

/// Distinct responses kept by default: a scope's four types, for a few hundred scopes
/// and the versions a run pushes.
pub const DEFAULT_CAPACITY: usize = 4096;

/// Transitions remembered per response (from an index to the next), for Delta upserts
/// and for the names a response marks: one per scope that receives it, typically.
const MEMO: usize = 8;

/// What a verified response reduces to, shared by every proxy that receives it.
#[derive(Debug)]
pub struct Verified {
    /// Per resource, in the response's order.
    pub summaries: Box<[Summary]>,
    /// Some resource carries the marker.
    pub marked: bool,
    /// Delta: each resource's name and version, in the response's order.
    pub held: Box<[(Box<str>, Box<str>)]>,
    /// State of the world CDS/LDS: the interned index these resources make.
    pub(crate) index: OnceLock<Arc<DepIndex>>,
    /// Delta CDS/LDS without removals: per index before, the index after (`None`: the
    /// same).
    pub(crate) upserts: Memo<DepIndex, Option<Arc<DepIndex>>>,
    /// EDS/RDS: per parent index, the positions these names take among its children.
    pub(crate) positions: Memo<DepIndex, Arc<[u32]>>,
    /// Delta without removals: per versions held before, the versions held after.
    pub(crate) versions: Memo<Versions, Arc<Versions>>,
}

/// A Delta proxy's versions of one type, by resource name.
pub type Versions = BTreeMap<Box<str>, Box<str>>;

/// A few `(state, value)` pairs, the state compared by pointer (and kept alive, so a
/// pointer is not reused while remembered).
#[derive(Debug)]
pub(crate) struct Memo<K, T>(Mutex<Vec<(Arc<K>, T)>>);

impl<K, T> Default for Memo<K, T> {
    fn default() -> Self {
        Memo(Mutex::new(Vec::new()))
    }
}

impl<K, T: Clone> Memo<K, T> {
    /// The value for `index`, computed by `make` the first time.
    pub fn get_or(&self, index: &Arc<K>, make: impl FnOnce() -> T) -> T {
        let found = {
            let memo = self.0.lock().unwrap_or_else(|e| e.into_inner());
            memo.iter()
                .find(|(i, _)| Arc::ptr_eq(i, index))
                .map(|(_, v)| v.clone())
        };
        if let Some(v) = found {
            return v;
        }
        let v = make();
        let mut memo = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if memo.len() >= MEMO {
            memo.remove(0);
        }
        memo.push((index.clone(), v.clone()));
        v
    }
}

impl Verified {
    fn new(summaries: Vec<Summary>, marked: bool, held: Box<[(Box<str>, Box<str>)]>) -> Self {
        Verified {
            summaries: summaries.into_boxed_slice(),
            marked,
            held,
            index: OnceLock::new(),
            upserts: Memo::default(),
            positions: Memo::default(),
            versions: Memo::default(),
        }
    }
}

/// What the cache did over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CacheReport {
    /// The bound asked for (0: every response is decoded).
    pub capacity: usize,
    /// Responses held at the end.
    pub entries: usize,
    /// Responses recognised (not decoded again), and their resource bytes.
    pub hits: u64,
    pub bytes_skipped: u64,
    /// Responses decoded (those that failed included), and the bytes of those verified.
    pub misses: u64,
    pub bytes_verified: u64,
    /// Responses dropped to stay within the bound.
    pub evictions: u64,
}

/// A response's type and the hash of its resources.
type Key = (Kind, u128);

#[derive(Debug, Default)]
struct Shard {
    current: HashMap<Key, Arc<Verified>>,
    previous: HashMap<Key, Arc<Verified>>,
}

/// Verified responses by content hash.
#[derive(Debug)]
pub struct VerifyCache {
    capacity: usize,
    /// Entries per generation per shard.
    generation: usize,
    shards: Box<[Mutex<Shard>]>,
    hits: AtomicU64,
    bytes_skipped: AtomicU64,
    misses: AtomicU64,
    bytes_verified: AtomicU64,
    evictions: AtomicU64,
}

impl Default for VerifyCache {
    fn default() -> Self {
        VerifyCache::new(DEFAULT_CAPACITY)
    }
}

impl VerifyCache {
    /// A cache of about `capacity` responses; 0 turns it off.
    pub fn new(capacity: usize) -> Self {
        VerifyCache {
            capacity,
            generation: (capacity / (2 * SHARDS)).max(1),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hits: AtomicU64::new(0),
            bytes_skipped: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            bytes_verified: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// The verified response of `kind` whose resources hash to `key` (from
    /// [`crate::wire::scan::head`]), if one was; counted as a hit, with `bytes`.
    pub fn lookup(&self, kind: Kind, key: u128, bytes: u64) -> Option<Arc<Verified>> {
        if self.capacity == 0 {
            return None;
        }
        let key = (kind, key);
        let mut shard = self.shard(key).lock().unwrap_or_else(|e| e.into_inner());
        let found = match shard.current.get(&key) {
            Some(v) => v.clone(),
            None => {
                let v = shard.previous.remove(&key)?;
                self.admit(&mut shard, key, v.clone());
                v
            }
        };
        self.hits.fetch_add(1, Relaxed);
        self.bytes_skipped.fetch_add(bytes, Relaxed);
        Some(found)
    }

    /// Decodes and verifies the resources of a response of `kind` (`Err` for a Delta
    /// resource without a body), `held` their Delta names and versions; kept under
    /// `key` (their hash) when they verify.
    pub fn verify<'a>(
        &self,
        kind: Kind,
        key: Option<u128>,
        marker: &Marker,
        resources: impl Iterator<Item = Result<&'a RawAny, DecodeError>>,
        held: Box<[(Box<str>, Box<str>)]>,
    ) -> Result<Arc<Verified>, DecodeError> {
        self.misses.fetch_add(1, Relaxed);
        let (summaries, marked, bytes) = decode_all(kind, marker, resources)?;
        self.bytes_verified.fetch_add(bytes, Relaxed);
        let verified = Arc::new(Verified::new(summaries, marked, held));
        if let Some(key) = key.filter(|_| self.capacity > 0) {
            let key = (kind, key);
            let mut shard = self.shard(key).lock().unwrap_or_else(|e| e.into_inner());
            self.admit(&mut shard, key, verified.clone());
        }
        Ok(verified)
    }

    fn shard(&self, key: Key) -> &Mutex<Shard> {
        &self.shards[key.1 as usize % SHARDS]
    }

    fn admit(&self, shard: &mut Shard, key: Key, v: Arc<Verified>) {
        if shard.current.len() >= self.generation && !shard.current.contains_key(&key) {
            let old = std::mem::replace(&mut shard.previous, std::mem::take(&mut shard.current));
            self.evictions.fetch_add(old.len() as u64, Relaxed);
        }
        shard.current.insert(key, v);
    }

    pub fn report(&self) -> CacheReport {
        let entries = self
            .shards
            .iter()
            .map(|s| {
                let s = s.lock().unwrap_or_else(|e| e.into_inner());
                s.current.len() + s.previous.len()
            })
            .sum();
        CacheReport {
            capacity: self.capacity,
            entries,
            hits: self.hits.load(Relaxed),
            bytes_skipped: self.bytes_skipped.load(Relaxed),
            misses: self.misses.load(Relaxed),
            bytes_verified: self.bytes_verified.load(Relaxed),
            evictions: self.evictions.load(Relaxed),
        }
    }
}

/// Decodes every resource of a response of `kind`: `(summaries, any marked, bytes)`.
fn decode_all<'a>(
    kind: Kind,
    marker: &Marker,
    resources: impl Iterator<Item = Result<&'a RawAny, DecodeError>>,
) -> Result<(Vec<Summary>, bool, u64), DecodeError> {
    let mut out = Vec::with_capacity(resources.size_hint().0);
    let mut marked = false;
    let mut bytes = 0;
    for r in resources {
        let any = r?;
        if any.type_url != kind.type_url().as_bytes() {
            return Err(DecodeError::TypeMismatch {
                expected: kind.type_url(),
                found: String::from_utf8_lossy(&any.type_url).into_owned(),
            });
        }
        bytes += any.value.len() as u64;
        let s = decode::decode(kind, any.value.clone(), marker)?;
        marked |= s.marked;
        out.push(s);
    }
    Ok((out, marked, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{SotwResponse, scan};
    use bytes::Bytes;
    use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
    use prost::Message;

    fn cla(name: &str) -> RawAny {
        let m = ClusterLoadAssignment {
            cluster_name: name.into(),
            ..Default::default()
        };
        RawAny {
            type_url: Bytes::from_static(Kind::Endpoint.type_url().as_bytes()),
            value: Bytes::from(m.encode_to_vec()),
        }
    }

    /// As a client does: a copy is looked up by the hash of its bytes, else verified.
    fn verify(
        cache: &VerifyCache,
        kind: Kind,
        rs: &[RawAny],
    ) -> Result<Arc<Verified>, DecodeError> {
        let msg = SotwResponse {
            version_info: "1".into(),
            resources: rs.to_vec(),
            type_url: kind.type_url().into(),
            nonce: "n".into(),
        }
        .encode_to_vec();
        let head = scan::head(&msg).unwrap();
        if let Some(v) = cache.lookup(kind, head.key, head.bytes) {
            return Ok(v);
        }
        cache.verify(
            kind,
            Some(head.key),
            &Marker::None,
            rs.iter().map(Ok),
            Box::default(),
        )
    }

    fn names(v: &Verified) -> Vec<&str> {
        v.summaries.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn a_copy_is_recognised_not_decoded_again() {
        let cache = VerifyCache::new(64);
        let rs = [cla("a"), cla("b")];
        let first = verify(&cache, Kind::Endpoint, &rs).unwrap();
        let second = verify(&cache, Kind::Endpoint, &rs).unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(names(&second), ["a", "b"]);
        let r = cache.report();
        assert_eq!((r.misses, r.hits, r.entries), (1, 1, 1));
        assert!(r.bytes_skipped >= r.bytes_verified && r.bytes_verified > 0);
        // Other content, another order: each verified on its own.
        assert_eq!(
            names(&verify(&cache, Kind::Endpoint, &[cla("b"), cla("a")]).unwrap()),
            ["b", "a"]
        );
        verify(&cache, Kind::Endpoint, &[cla("a")]).unwrap();
        assert_eq!(cache.report().misses, 3);
    }

    #[test]
    fn the_type_is_part_of_the_key() {
        let cache = VerifyCache::new(64);
        let rs = [cla("a")];
        verify(&cache, Kind::Endpoint, &rs).unwrap();
        // The same bytes in a response of another type are not a copy: a mismatch.
        assert!(matches!(
            verify(&cache, Kind::Cluster, &rs),
            Err(DecodeError::TypeMismatch { .. })
        ));
    }

    #[test]
    fn what_fails_is_never_cached() {
        let cache = VerifyCache::new(64);
        let junk = [RawAny {
            value: Bytes::from_static(&[0xff, 0xff, 0xff]),
            ..cla("a")
        }];
        for _ in 0..2 {
            assert!(matches!(
                verify(&cache, Kind::Endpoint, &junk),
                Err(DecodeError::Resource { .. })
            ));
        }
        let r = cache.report();
        assert_eq!((r.misses, r.hits, r.entries), (2, 0, 0));
    }

    #[test]
    fn bounded_with_evictions_counted() {
        let cache = VerifyCache::new(2 * SHARDS);
        for i in 0..1000 {
            verify(&cache, Kind::Endpoint, &[cla(&i.to_string())]).unwrap();
        }
        let r = cache.report();
        assert!(r.entries <= 2 * SHARDS, "{r:?}");
        assert_eq!(r.evictions + r.entries as u64, 1000);
        // Off: every copy is decoded.
        let off = VerifyCache::new(0);
        verify(&off, Kind::Endpoint, &[cla("a")]).unwrap();
        verify(&off, Kind::Endpoint, &[cla("a")]).unwrap();
        let r = off.report();
        assert_eq!((r.misses, r.hits, r.entries), (2, 0, 0));
    }

    #[test]
    fn a_recent_entry_survives_a_generation() {
        let cache = VerifyCache::new(2 * SHARDS);
        let hot = [cla("hot")];
        verify(&cache, Kind::Endpoint, &hot).unwrap();
        for i in 0..1000 {
            verify(&cache, Kind::Endpoint, &[cla(&i.to_string())]).unwrap();
            verify(&cache, Kind::Endpoint, &hot).unwrap();
        }
        assert_eq!(cache.report().misses, 1001);
    }
}
