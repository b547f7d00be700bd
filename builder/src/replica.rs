//! The builder's replica of the config KV: every object of every cluster, the KV revision
//! it reflects, and which namespaces changed since the last build.
//!
//! Dirtiness comes from the replica's own change log, not from push requests, so a
//! builder that skipped revisions (another replica built them) still rebuilds everything
//! that moved since *its* last build.

use crate::mesh::NamespaceObjects;
use shoal_proto::change::{ChangeKey, ChangeSet, TriggerReason, unix_nanos};
use shoal_proto::config::{Config, ConfigKey, Kind};
use shoal_proto::transport::{
    KvEntry, decode_config, parse_config_kv_key, parse_legacy_config_kv_key,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::SystemTime;

#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("config KV key {0:?} is not <cluster>.<source>.<kind>.<namespace>.<name>")]
    BadKey(String),
    #[error("config KV key {key:?}: undecodable value: {reason}")]
    BadValue { key: String, reason: String },
}

/// Namespaces to rebuild, as a build reads a [`ChangeSet`] of config keys.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Dirty {
    pub namespaces: BTreeSet<String>,
    /// The kinds that changed in each of `namespaces`, so a build can skip what they
    /// cannot affect (a VirtualService edit leaves services and endpoints as they were).
    /// A namespace missing here is rebuilt entirely.
    pub kinds: BTreeMap<String, BTreeSet<Kind>>,
    /// Everything (first build).
    pub all: bool,
}

impl Dirty {
    /// The namespaces (and kinds) `changes` names; everything when it names nothing.
    /// Namespace objects feed no chunk, so they dirty nothing.
    pub fn of(changes: &ChangeSet) -> Dirty {
        if changes.is_everything() {
            return Dirty {
                all: true,
                ..Dirty::default()
            };
        }
        let mut kinds: BTreeMap<String, BTreeSet<Kind>> = BTreeMap::new();
        for key in changes.config_keys().filter(|k| k.kind != Kind::Namespace) {
            kinds
                .entry(key.namespace.clone())
                .or_default()
                .insert(key.kind);
        }
        Dirty {
            namespaces: kinds.keys().cloned().collect(),
            kinds,
            all: false,
        }
    }

    pub fn is_empty(&self) -> bool {
        !self.all && self.namespaces.is_empty()
    }
}

/// A namespace's objects by kind, each kind in KV key order (the order builds read them).
type NamespaceStore = BTreeMap<Kind, BTreeMap<String, Config>>;

#[derive(Default)]
pub struct Replica {
    /// Objects by namespace, so a namespace's build reads them without a lookup each.
    by_namespace: BTreeMap<String, NamespaceStore>,
    /// Where the object at each KV key is held.
    location: HashMap<String, (String, Kind)>,
    key_revisions: HashMap<String, u64>,
    revision: u64,
    /// Objects changed since the last build.
    changed: BTreeSet<ConfigKey>,
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
        self.location.len()
    }

    pub fn is_empty(&self) -> bool {
        self.location.is_empty()
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
        let key = parse_config_kv_key(&entry.key)
            .map(|(_, key)| key)
            .or_else(|| parse_legacy_config_kv_key(&entry.key).map(|(_, key)| key))
            .ok_or_else(|| ReplicaError::BadKey(entry.key.clone()))?;
        match entry.value {
            Some(bytes) => {
                let config = decode_config(&bytes).map_err(|e| ReplicaError::BadValue {
                    key: entry.key.clone(),
                    reason: e.to_string(),
                })?;
                self.remove(&entry.key);
                self.changed.insert(key);
                let (namespace, kind) = (config.meta.namespace.clone(), config.kind());
                self.by_namespace
                    .entry(namespace.clone())
                    .or_default()
                    .entry(kind)
                    .or_default()
                    .insert(entry.key.clone(), config);
                self.location.insert(entry.key, (namespace, kind));
            }
            None => {
                if self.remove(&entry.key).is_some() {
                    self.changed.insert(key);
                }
            }
        }
        Ok(true)
    }

    /// Removes the object at `kv_key`; returns the namespace it was in.
    fn remove(&mut self, kv_key: &str) -> Option<String> {
        let (namespace, kind) = self.location.remove(kv_key)?;
        if let Some(store) = self.by_namespace.get_mut(&namespace) {
            if let Some(objects) = store.get_mut(&kind) {
                objects.remove(kv_key);
                if objects.is_empty() {
                    store.remove(&kind);
                }
            }
            if store.is_empty() {
                self.by_namespace.remove(&namespace);
            }
        }
        Some(namespace)
    }

    /// What changed since the last call, as config keys (with no reasons or trace of
    /// its own: those come from the push requests it is merged with); everything on the
    /// first call; `None` when nothing changed.
    pub fn take_changes(&mut self) -> Option<ChangeSet> {
        let now = SystemTime::now();
        let changes = if std::mem::take(&mut self.never_built) {
            self.changed.clear();
            ChangeSet::everything(TriggerReason::GlobalUpdate, now)
        } else if self.changed.is_empty() {
            return None;
        } else {
            let keys = std::mem::take(&mut self.changed);
            let full = keys.iter().any(|k| !k.kind.is_endpoint_only());
            ChangeSet {
                full,
                keys: keys.into_iter().map(ChangeKey::Config).collect(),
                start_unix_nanos: unix_nanos(now),
                ..ChangeSet::default()
            }
        };
        Some(ChangeSet {
            reasons: Default::default(),
            ..changes
        })
    }

    /// [`Dirty::of`] what changed since the last call.
    pub fn take_dirty(&mut self) -> Dirty {
        self.take_changes()
            .map(|c| Dirty::of(&c))
            .unwrap_or_default()
    }

    /// Namespaces holding at least one object.
    pub fn namespaces(&self) -> impl Iterator<Item = &String> {
        self.by_namespace.keys()
    }

    pub fn namespace_objects(&self, namespace: &str) -> NamespaceObjects<'_> {
        let mut objects = NamespaceObjects::default();
        for (kind, configs) in self.by_namespace.get(namespace).into_iter().flatten() {
            objects.by_kind.insert(*kind, configs.values().collect());
        }
        objects
    }
}
