//! A stream's state per watched type: at most the few types this server generates, so
//! a vector sorted by type URL. A `BTreeMap` allocated its first node with room for
//! eleven entries (~2.4 KiB per stream for four watches); this holds what is there.

/// Values by served type URL (a static one of `PUSH_ORDER`), iterated in type URL order.
#[derive(Debug)]
pub(crate) struct ByType<V> {
    entries: Vec<(&'static str, V)>,
}

impl<V> Default for ByType<V> {
    fn default() -> Self {
        ByType {
            entries: Vec::new(),
        }
    }
}

impl<V> ByType<V> {
    fn position(&self, type_url: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(t, _)| (*t).cmp(type_url))
    }

    pub fn get(&self, type_url: &str) -> Option<&V> {
        let i = self.position(type_url).ok()?;
        Some(&self.entries[i].1)
    }

    pub fn get_mut(&mut self, type_url: &str) -> Option<&mut V> {
        let i = self.position(type_url).ok()?;
        Some(&mut self.entries[i].1)
    }

    pub fn contains_key(&self, type_url: &str) -> bool {
        self.position(type_url).is_ok()
    }

    /// The value of `type_url`, inserted with `new` if there is none; the vector grows
    /// by one at a time, since a stream watches at most five types.
    pub fn get_or_insert_with(
        &mut self,
        type_url: &'static str,
        new: impl FnOnce() -> V,
    ) -> &mut V {
        let i = match self.position(type_url) {
            Ok(i) => i,
            Err(i) => {
                self.entries.reserve_exact(1);
                self.entries.insert(i, (type_url, new()));
                i
            }
        };
        &mut self.entries[i].1
    }

    pub fn remove(&mut self, type_url: &str) -> Option<V> {
        let i = self.position(type_url).ok()?;
        Some(self.entries.remove(i).1)
    }

    /// By type URL.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &V)> {
        self.entries.iter().map(|(t, v)| (*t, v))
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xds::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE};

    #[test]
    fn kept_in_type_url_order_with_no_spare_room() {
        let mut by = ByType::default();
        for t in [ROUTE, CLUSTER, LISTENER, ENDPOINT] {
            *by.get_or_insert_with(t, || 0) += 1;
        }
        *by.get_or_insert_with(CLUSTER, || 0) += 1;
        let order: Vec<_> = by.iter().map(|(t, v)| (t, *v)).collect();
        let mut expected = vec![(CLUSTER, 2), (ENDPOINT, 1), (LISTENER, 1), (ROUTE, 1)];
        expected.sort();
        assert_eq!(order, expected);
        assert_eq!(by.entries.capacity(), 4);
        assert_eq!(by.get(ENDPOINT), Some(&1));
        assert_eq!(by.remove(ENDPOINT), Some(1));
        assert!(!by.contains_key(ENDPOINT));
        assert_eq!(by.get_mut(ENDPOINT), None);
    }
}
