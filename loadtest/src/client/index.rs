//! What a CDS or LDS state names for the next type (cluster → its EDS service name,
//! listener → its route configurations), shared between proxies that hold the same state.
//!
//! Proxies of one Sidecar scope receive the same clusters and listeners, so an index is
//! interned: ten thousand proxies in ten namespaces hold ten indexes, not ten thousand.

use super::decode::Summary;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

/// A parent's name and its children's names (sorted, unique).
type Parent = (Box<str>, Box<[Box<str>]>);

/// Parents and the child names they reference, sorted.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct DepIndex {
    /// Sorted by parent name, unique.
    parents: Vec<Parent>,
    /// The union of every parent's children, sorted and unique.
    children: Vec<Box<str>>,
}

/// One parent and its children, as decoded.
pub type Entry = (String, Vec<String>);

impl DepIndex {
    /// An index of `entries`; a parent named twice keeps its last entry.
    pub fn new(entries: Vec<Entry>) -> Self {
        let mut parents: Vec<Parent> = entries
            .into_iter()
            .map(|(p, c)| (p.into_boxed_str(), boxed(c)))
            .collect();
        // Stable sort then keep the last of equal names.
        parents.sort_by(|a, b| a.0.cmp(&b.0));
        let mut unique: Vec<Parent> = Vec::with_capacity(parents.len());
        for p in parents {
            match unique.last_mut() {
                Some(last) if last.0 == p.0 => *last = p,
                _ => unique.push(p),
            }
        }
        Self::from_sorted(unique)
    }

    fn from_sorted(parents: Vec<Parent>) -> Self {
        let mut children: Vec<Box<str>> = parents
            .iter()
            .flat_map(|(_, c)| c.iter().cloned())
            .collect();
        children.sort_unstable();
        children.dedup();
        DepIndex { parents, children }
    }

    /// Every child name, sorted.
    pub fn children(&self) -> &[Box<str>] {
        &self.children
    }

    pub fn has_parent(&self, name: &str) -> bool {
        self.parents
            .binary_search_by(|(p, _)| (**p).cmp(name))
            .is_ok()
    }

    /// The position of `name` in [`children`](Self::children).
    pub fn child_position(&self, name: &str) -> Option<usize> {
        self.children.binary_search_by(|c| (**c).cmp(name)).ok()
    }

    pub fn len(&self) -> usize {
        self.parents.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parents.is_empty()
    }

    /// This index with `upserts` applied and `removed` parents gone (a Delta response);
    /// `None` when that changes nothing.
    pub fn with_changes(&self, upserts: &[Summary], removed: &[String]) -> Option<DepIndex> {
        let changes = upserts.iter().any(
            |Summary {
                 name: p,
                 children: c,
                 ..
             }| {
                match self
                    .parents
                    .binary_search_by(|(q, _)| (**q).cmp(p.as_str()))
                {
                    Ok(i) => !same(&self.parents[i].1, c),
                    Err(_) => true,
                }
            },
        ) || removed.iter().any(|r| self.has_parent(r));
        if !changes {
            return None;
        }
        let mut map: std::collections::BTreeMap<Box<str>, Box<[Box<str>]>> =
            self.parents.iter().cloned().collect();
        for r in removed {
            map.remove(r.as_str());
        }
        for s in upserts {
            map.insert(s.name.as_str().into(), boxed(s.children.clone()));
        }
        Some(Self::from_sorted(map.into_iter().collect()))
    }

    fn hash64(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.hash(&mut h);
        h.finish()
    }
}

fn boxed(mut c: Vec<String>) -> Box<[Box<str>]> {
    c.sort_unstable();
    c.dedup();
    c.into_iter().map(String::into_boxed_str).collect()
}

fn same(have: &[Box<str>], want: &[String]) -> bool {
    let mut want: Vec<&str> = want.iter().map(String::as_str).collect();
    want.sort_unstable();
    want.dedup();
    have.len() == want.len() && have.iter().zip(want).all(|(a, b)| &**a == b)
}

/// Interns indexes by content, so equal states share one allocation.
#[derive(Debug, Default)]
pub struct Interner {
    inner: Mutex<InternerState>,
}

#[derive(Debug, Default)]
struct InternerState {
    map: HashMap<u64, Vec<Arc<DepIndex>>>,
    inserts: usize,
}

impl Interner {
    /// The shared copy of `index`.
    pub fn intern(&self, index: DepIndex) -> Arc<DepIndex> {
        let hash = index.hash64();
        let mut state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = state
            .map
            .get(&hash)
            .and_then(|v| v.iter().find(|i| ***i == index))
        {
            return found.clone();
        }
        state.inserts += 1;
        // Forget indexes nobody holds any more, now and then.
        if state.inserts.is_multiple_of(1024) {
            state.map.retain(|_, v| {
                v.retain(|i| Arc::strong_count(i) > 1);
                !v.is_empty()
            });
        }
        let shared = Arc::new(index);
        state.map.entry(hash).or_default().push(shared.clone());
        shared
    }

    /// Distinct indexes held.
    pub fn len(&self) -> usize {
        let state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        state.map.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(p: &str, c: &[&str]) -> Entry {
        (p.into(), c.iter().map(|s| s.to_string()).collect())
    }

    fn up(p: &str, c: &[&str]) -> Summary {
        let (name, children) = e(p, c);
        Summary {
            name,
            children,
            marked: false,
        }
    }

    #[test]
    fn sorted_unique_children() {
        let i = DepIndex::new(vec![e("b", &["y", "x"]), e("a", &["x"]), e("c", &[])]);
        let kids: Vec<&str> = i.children().iter().map(|c| &**c).collect();
        assert_eq!(kids, ["x", "y"]);
        assert!(i.has_parent("c") && !i.has_parent("d"));
        assert_eq!(i.child_position("y"), Some(1));
        assert_eq!(i.len(), 3);
    }

    #[test]
    fn delta_changes() {
        let i = DepIndex::new(vec![e("a", &["x"]), e("b", &["y"])]);
        assert!(i.with_changes(&[up("a", &["x"])], &["zz".into()]).is_none());
        let j = i.with_changes(&[up("c", &["z"])], &["b".into()]).unwrap();
        let kids: Vec<&str> = j.children().iter().map(|c| &**c).collect();
        assert_eq!(kids, ["x", "z"]);
        assert!(!j.has_parent("b"));
    }

    #[test]
    fn interning_shares_equal_indexes() {
        let interner = Interner::default();
        let a = interner.intern(DepIndex::new(vec![e("a", &["x"])]));
        let b = interner.intern(DepIndex::new(vec![e("a", &["x"])]));
        let c = interner.intern(DepIndex::new(vec![e("a", &["y"])]));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(interner.len(), 2);
    }
}
