//! The object store: every object of every resource, one global revision counter and a
//! bounded history of changes. No I/O, no locks: the server wraps it in a mutex.
//!
//! Like etcd behind a real apiserver, each write takes the next revision, and that
//! revision is the object's `metadata.resourceVersion`. The history keeps the last
//! changes (all resources in one sequence) so a watch can resume from a revision, and so
//! a paginated list can serve every page from the snapshot of its first page.

mod error;
mod history;
mod page;
mod stamp;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::resource::{GroupResource, Registry, ResourceType};
use crate::selector::Selection;

pub use error::{Result, StoreError};
pub use history::{Change, ChangeKind, DEFAULT_HISTORY_CAPACITY, History};
pub use page::{ListPage, ListRequest};

/// Where an object lives within its resource: (namespace, name); the namespace is empty
/// for cluster-scoped resources. Ordered, so lists and pages have a stable order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

type Objects = BTreeMap<ObjectKey, Arc<Value>>;

/// The state of the server: registry, objects, revision, history.
#[derive(Debug)]
pub struct Store {
    registry: Registry,
    objects: BTreeMap<GroupResource, Objects>,
    revision: u64,
    history: History,
}

impl Store {
    pub fn new(registry: Registry, history_capacity: usize) -> Self {
        Self {
            registry,
            objects: BTreeMap::new(),
            revision: 0,
            history: History::new(history_capacity),
        }
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn register(&mut self, resource: ResourceType) {
        self.registry.register(resource);
    }

    /// The revision of the last write (0 before any): what a list reports.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    pub fn get(&self, resource: &GroupResource, key: &ObjectKey) -> Option<Arc<Value>> {
        self.objects.get(resource)?.get(key).cloned()
    }

    /// Every current object of `resource` that `selection` selects, in key order.
    pub fn select(&self, resource: &GroupResource, selection: &Selection) -> Vec<Arc<Value>> {
        self.objects.get(resource).map_or_else(Vec::new, |objects| {
            objects
                .values()
                .filter(|object| selection.matches(object))
                .cloned()
                .collect()
        })
    }

    /// Adds a new object; it must not exist yet.
    pub fn create(&mut self, resource: &GroupResource, object: Value) -> Result<Arc<Change>> {
        let resource_type = self.resource_type(resource)?;
        let key = stamp::key_of(resource_type, &object)?;
        if self.get(resource, &key).is_some() {
            return Err(StoreError::AlreadyExists {
                resource: resource.clone(),
                name: key.name,
            });
        }
        let revision = self.revision + 1;
        let object = stamp::created(resource_type, object, revision);
        Ok(self.commit(resource, key, ChangeKind::Added, object, None))
    }

    /// Replaces an existing object. When the new object carries a
    /// `metadata.resourceVersion`, it must be the current one (optimistic concurrency).
    pub fn replace(&mut self, resource: &GroupResource, object: Value) -> Result<Arc<Change>> {
        let resource_type = self.resource_type(resource)?;
        let key = stamp::key_of(resource_type, &object)?;
        let Some(previous) = self.get(resource, &key) else {
            return Err(StoreError::NotFound {
                resource: resource.clone(),
                name: key.name,
            });
        };
        let expected = object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|version| !version.is_empty());
        let current = previous
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str);
        if expected.is_some() && expected != current {
            return Err(StoreError::Conflict {
                resource: resource.clone(),
                name: key.name,
            });
        }
        let revision = self.revision + 1;
        let object = stamp::replaced(resource_type, object, &previous, revision);
        Ok(self.commit(resource, key, ChangeKind::Modified, object, Some(previous)))
    }

    /// Creates the object, or replaces it whatever its current version (a forced apply).
    pub fn apply(&mut self, resource: &GroupResource, mut object: Value) -> Result<Arc<Change>> {
        let key = stamp::key_of(self.resource_type(resource)?, &object)?;
        if self.get(resource, &key).is_none() {
            return self.create(resource, object);
        }
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("resourceVersion");
        }
        self.replace(resource, object)
    }

    /// Deletes an object. Its DELETED change carries its last state at the new revision,
    /// as the apiserver's DELETED watch event does.
    pub fn delete(&mut self, resource: &GroupResource, key: &ObjectKey) -> Result<Arc<Change>> {
        self.resource_type(resource)?;
        let Some(previous) = self.get(resource, key) else {
            return Err(StoreError::NotFound {
                resource: resource.clone(),
                name: key.name.clone(),
            });
        };
        let revision = self.revision + 1;
        let object = stamp::with_revision((*previous).clone(), revision);
        Ok(self.commit(
            resource,
            key.clone(),
            ChangeKind::Deleted,
            object,
            Some(previous),
        ))
    }

    /// The retained changes of `resource` after `revision`, oldest first; `Expired` when
    /// some of them are no longer retained (a watch from there must relist).
    pub fn changes_since(
        &self,
        resource: &GroupResource,
        revision: u64,
    ) -> Result<Vec<Arc<Change>>> {
        Ok(self
            .history
            .since(revision)?
            .filter(|change| change.resource == *resource)
            .cloned()
            .collect())
    }

    /// Forgets the history, as an etcd compaction does: resuming a watch or a list from
    /// any earlier revision now fails with 410 Expired.
    pub fn compact(&mut self) {
        self.history.compact(self.revision);
    }

    fn resource_type(&self, resource: &GroupResource) -> Result<&ResourceType> {
        self.registry
            .get(resource)
            .ok_or_else(|| StoreError::UnknownResource(resource.clone()))
    }

    fn commit(
        &mut self,
        resource: &GroupResource,
        key: ObjectKey,
        kind: ChangeKind,
        object: Value,
        previous: Option<Arc<Value>>,
    ) -> Arc<Change> {
        self.revision += 1;
        let object = Arc::new(object);
        let objects = self.objects.entry(resource.clone()).or_default();
        match kind {
            ChangeKind::Deleted => objects.remove(&key),
            ChangeKind::Added | ChangeKind::Modified => objects.insert(key.clone(), object.clone()),
        };
        let change = Arc::new(Change {
            revision: self.revision,
            resource: resource.clone(),
            key,
            kind,
            object,
            previous,
        });
        self.history.push(change.clone());
        change
    }
}

#[cfg(test)]
mod tests;
