//! The builder's replica of the config KV: every object of every cluster, the KV revision
//! it reflects, and which namespaces changed since the last build.
//!
//! Dirtiness comes from the replica's own change log, not from push requests, so a
//! builder that skipped revisions (another replica built them) still rebuilds everything
//! that moved since *its* last build.

use crate::mesh::NamespaceObjects;
use shoal_proto::config::{Config, Kind};
use shoal_proto::transport::{KvEntry, decode_config, parse_config_kv_key};
use std::collections::{BTreeMap, BTreeSet, HashMap};

#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("config KV key {0:?} is not <cluster>.<kind>.<namespace>.<name>")]
    BadKey(String),
    #[error("config KV key {key:?}: undecodable value: {reason}")]
    BadValue { key: String, reason: String },
}

/// Namespaces to rebuild.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Dirty {
    pub namespaces: BTreeSet<String>,
    /// Everything (first build).
    pub all: bool,
}

impl Dirty {
    pub fn is_empty(&self) -> bool {
        !self.all && self.namespaces.is_empty()
    }
}

#[derive(Default)]
pub struct Replica {
    objects: HashMap<String, Config>,
    by_namespace: BTreeMap<String, BTreeSet<String>>,
    key_revisions: HashMap<String, u64>,
    revision: u64,
    dirty: BTreeSet<String>,
    never_built: bool,
}

impl Replica {
    pub fn new() -> Self {
        Self {
            never_built: true,
            ..Self::default()
        }
    }

    /// The highest KV revision applied.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Applies one KV entry. Entries at or below the revision already held for their key
    /// are replays and ignored. A bad entry still advances the revision (it is skipped,
    /// not waited for).
    pub fn apply(&mut self, entry: KvEntry) -> Result<bool, ReplicaError> {
        self.revision = self.revision.max(entry.revision);
        if self
            .key_revisions
            .get(&entry.key)
            .is_some_and(|r| *r >= entry.revision)
        {
            return Ok(false);
        }
        self.key_revisions.insert(entry.key.clone(), entry.revision);
        let (_, key) = parse_config_kv_key(&entry.key)
            .ok_or_else(|| ReplicaError::BadKey(entry.key.clone()))?;
        match entry.value {
            Some(bytes) => {
                let config = decode_config(&bytes).map_err(|e| ReplicaError::BadValue {
                    key: entry.key.clone(),
                    reason: e.to_string(),
                })?;
                if let Some(old) = self.objects.get(&entry.key) {
                    self.dirty.insert(old.meta.namespace.clone());
                }
                if key.kind != Kind::Namespace {
                    self.dirty.insert(config.meta.namespace.clone());
                }
                self.by_namespace
                    .entry(config.meta.namespace.clone())
                    .or_default()
                    .insert(entry.key.clone());
                self.objects.insert(entry.key, config);
            }
            None => {
                if let Some(old) = self.objects.remove(&entry.key) {
                    if let Some(keys) = self.by_namespace.get_mut(&old.meta.namespace) {
                        keys.remove(&entry.key);
                        if keys.is_empty() {
                            self.by_namespace.remove(&old.meta.namespace);
                        }
                    }
                    if key.kind != Kind::Namespace {
                        self.dirty.insert(old.meta.namespace);
                    }
                }
            }
        }
        Ok(true)
    }

    /// What changed since the last call; the first call returns everything.
    pub fn take_dirty(&mut self) -> Dirty {
        let all = std::mem::take(&mut self.never_built);
        Dirty {
            namespaces: std::mem::take(&mut self.dirty),
            all,
        }
    }

    /// Namespaces holding at least one object.
    pub fn namespaces(&self) -> impl Iterator<Item = &String> {
        self.by_namespace.keys()
    }

    pub fn namespace_objects(&self, namespace: &str) -> NamespaceObjects<'_> {
        let mut objects = NamespaceObjects::default();
        if let Some(keys) = self.by_namespace.get(namespace) {
            for key in keys {
                if let Some(c) = self.objects.get(key) {
                    objects.push(c);
                }
            }
        }
        objects
    }
}
