//! A map split into shards, each behind its own `Arc`: a context derived from another
//! shares every shard its change leaves alone, so that deriving one (and freeing the one
//! it replaces) costs what the change touched, not the size of the mesh.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher, Hash};
use std::sync::Arc;

/// Enough that a shard of a million-entry map, what a change copies per shard it
/// touches, holds ~4,000 entries; few enough that the vector of shards each derived map
/// copies is 2 KiB.
const SHARDS: usize = 256;

/// Picks a key's shard: the same for equal keys in every map of the process.
type ShardHasher = BuildHasherDefault<DefaultHasher>;

#[derive(Clone, Debug)]
pub(crate) struct ShardedMap<K, V> {
    /// Empty until the first insert, then `SHARDS` long.
    shards: Vec<Arc<HashMap<K, V>>>,
    len: usize,
}

impl<K, V> Default for ShardedMap<K, V> {
    fn default() -> Self {
        Self {
            shards: Vec::new(),
            len: 0,
        }
    }
}

fn shard_of<Q: Hash + ?Sized>(key: &Q) -> usize {
    (ShardHasher::default().hash_one(key) % SHARDS as u64) as usize
}

impl<K: Hash + Eq + Clone, V: Clone> ShardedMap<K, V> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.shards.get(shard_of(key))?.get(key)
    }

    /// Inserts `value` under `key`, copying the key's shard first if another map shares it.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        if self.shards.is_empty() {
            self.shards = (0..SHARDS).map(|_| Arc::default()).collect();
        }
        let shard = Arc::make_mut(&mut self.shards[shard_of(&key)]);
        let old = shard.insert(key, value);
        self.len += usize::from(old.is_none());
        old
    }

    /// Removes `key`, copying its shard first only if it is there and shared.
    pub(crate) fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = self.shards.get_mut(shard_of(key))?;
        if !slot.contains_key(key) {
            return None;
        }
        let old = Arc::make_mut(slot).remove(key);
        self.len -= usize::from(old.is_some());
        old
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.shards.iter().flat_map(|shard| shard.iter())
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    /// How many shards this map shares with `other` (the same `Arc`).
    #[cfg(test)]
    pub(crate) fn shared_with(&self, other: &Self) -> usize {
        self.shards
            .iter()
            .zip(&other.shards)
            .filter(|(a, b)| Arc::ptr_eq(a, b))
            .count()
    }
}

impl<K: Hash + Eq + Clone, V: Clone> FromIterator<(K, V)> for ShardedMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut map = Self::default();
        for (k, v) in iter {
            map.insert(k, v);
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_shares_every_shard_its_changes_leave_alone() {
        let map: ShardedMap<String, u32> = (0..10_000).map(|i| (format!("k{i}"), i)).collect();
        assert_eq!(map.len(), 10_000);
        let mut next = map.clone();
        assert_eq!(next.insert("k1".into(), 7), Some(1));
        assert_eq!(next.insert("new".into(), 8), None);
        assert_eq!(next.remove("k2"), Some(2));
        assert_eq!(next.remove("absent"), None);
        assert_eq!(next.len(), 10_000);
        assert!(next.shared_with(&map) >= SHARDS - 3);
        assert_eq!(next.get("k1"), Some(&7));
        assert_eq!(next.get("k2"), None);
        // The original is untouched.
        assert_eq!(
            (map.get("k1"), map.get("k2"), map.get("new")),
            (Some(&1), Some(&2), None)
        );
        assert_eq!(next.values().count(), 10_000);
    }

    #[test]
    fn an_empty_map_allocates_nothing_until_its_first_insert() {
        let mut map: ShardedMap<String, u32> = ShardedMap::default();
        assert!(map.shards.is_empty());
        assert_eq!((map.get("a"), map.iter().count()), (None, 0));
        assert_eq!(map.remove("a"), None);
        map.insert("a".into(), 1);
        assert_eq!((map.len(), map.shards.len()), (1, SHARDS));
    }
}
