//! Lists, paginated with `limit` and `continue` from one consistent snapshot.
//!
//! A continue token names the snapshot revision and the last key served. The next page
//! starts from the current objects after that key and undoes, newest first, every
//! retained change made since the snapshot, which rebuilds the snapshot exactly. Once the
//! history no longer reaches back that far, the token has expired (410), as on a real
//! apiserver after an etcd compaction.

use std::ops::Bound;
use std::sync::Arc;

use serde_json::Value;

use super::{ObjectKey, Objects, Result, Store, StoreError};
use crate::resource::GroupResource;
use crate::selector::Selection;

/// A LIST request's parameters.
#[derive(Debug, Clone, Default)]
pub struct ListRequest {
    pub selection: Selection,
    /// At most this many items (`None` or 0: all).
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct ListPage {
    /// The snapshot's revision: where a watch continuing this list starts.
    pub revision: u64,
    pub items: Vec<Arc<Value>>,
    /// Present when more items follow.
    pub continue_token: Option<String>,
}

impl Store {
    pub fn list(&self, resource: &GroupResource, request: &ListRequest) -> Result<ListPage> {
        self.resource_type(resource)?;
        let (snapshot, after) = match request.continue_token.as_deref() {
            Some(token) => {
                let (snapshot, after) = parse_token(token)?;
                if snapshot > self.revision {
                    return Err(StoreError::InvalidContinue(token.to_owned()));
                }
                (snapshot, Some(after))
            }
            None => (self.revision, None),
        };
        let limit = request
            .limit
            .filter(|limit| *limit > 0)
            .unwrap_or(usize::MAX);
        let selection = &request.selection;
        if snapshot == self.revision {
            // Nothing was written since the snapshot: the current objects are it, read
            // from the key after the last one served (a page costs its own length, not
            // the length of what follows it).
            let lower = after.as_ref().map_or(Bound::Unbounded, Bound::Excluded);
            let objects = self
                .objects
                .get(resource)
                .into_iter()
                .flat_map(|all| all.range((lower, Bound::Unbounded)));
            return Ok(page(snapshot, objects, selection, limit));
        }
        let objects = self.snapshot_after(resource, snapshot, after.as_ref())?;
        Ok(page(snapshot, objects.iter(), selection, limit))
    }

    /// The objects of `resource` after key `after`, as they were at revision `snapshot`.
    fn snapshot_after(
        &self,
        resource: &GroupResource,
        snapshot: u64,
        after: Option<&ObjectKey>,
    ) -> Result<Objects> {
        let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
        let mut objects: Objects = self.objects.get(resource).map_or_else(Objects::new, |all| {
            all.range((lower, Bound::Unbounded))
                .map(|(key, object)| (key.clone(), object.clone()))
                .collect()
        });
        if snapshot == self.revision {
            return Ok(objects);
        }
        let later = self
            .history
            .since(snapshot)
            .map_err(|_| StoreError::ContinueExpired)?;
        for change in later.rev() {
            if change.resource != *resource || after.is_some_and(|after| change.key <= *after) {
                continue;
            }
            match &change.previous {
                Some(previous) => objects.insert(change.key.clone(), previous.clone()),
                None => objects.remove(&change.key),
            };
        }
        Ok(objects)
    }
}

/// The first `limit` objects of `objects` (in key order) that `selection` selects, and a
/// continue token when more follow.
fn page<'a>(
    snapshot: u64,
    objects: impl Iterator<Item = (&'a ObjectKey, &'a Arc<Value>)>,
    selection: &Selection,
    limit: usize,
) -> ListPage {
    let mut selected = objects.filter(|(_, object)| selection.matches(object));
    let items: Vec<_> = selected.by_ref().take(limit).collect();
    let more = selected.next().is_some();
    let continue_token = match items.last() {
        Some((last, _)) if more => Some(token(snapshot, last)),
        _ => None,
    };
    ListPage {
        revision: snapshot,
        items: items
            .into_iter()
            .map(|(_, object)| object.clone())
            .collect(),
        continue_token,
    }
}

/// Namespaces and names cannot contain `/`, so it separates the parts unambiguously.
fn token(snapshot: u64, last: &ObjectKey) -> String {
    format!("{snapshot}/{}/{}", last.namespace, last.name)
}

fn parse_token(token: &str) -> Result<(u64, ObjectKey)> {
    let invalid = || StoreError::InvalidContinue(token.to_owned());
    let mut parts = token.splitn(3, '/');
    let snapshot = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(invalid)?;
    let namespace = parts.next().ok_or_else(invalid)?;
    let name = parts
        .next()
        .filter(|name| !name.is_empty())
        .ok_or_else(invalid)?;
    Ok((snapshot, ObjectKey::new(namespace, name)))
}
