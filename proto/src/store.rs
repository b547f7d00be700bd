//! Istio's ConfigStore / ConfigStoreCache: an in-memory, fully replicated view of config
//! with per-object resource versions and ordered event handlers.
//!
//! `create` fails on an existing key, `update` on a missing one or on a stale resource
//! version (optimistic concurrency); handlers run in registration order, synchronously,
//! with the old and new object, and must be registered before the first mutation.

use crate::config::{Config, ConfigKey, Kind};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Add,
    Update,
    Delete,
}

/// One change: `old` is set for Update and Delete, `new` for Add and Update.
#[derive(Clone, Debug)]
pub struct Event<'a> {
    pub kind: EventKind,
    pub old: Option<&'a Config>,
    pub new: Option<&'a Config>,
}

impl Event<'_> {
    pub fn key(&self) -> ConfigKey {
        self.new
            .or(self.old)
            .map(Config::key)
            .expect("event has an object")
    }
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("{0} already exists")]
    AlreadyExists(ConfigKey),
    #[error("{0} not found")]
    NotFound(ConfigKey),
    #[error("{key}: resource version {given} is stale (current {current})")]
    Conflict {
        key: ConfigKey,
        given: String,
        current: String,
    },
}

pub type Handler = Box<dyn Fn(&Event<'_>) + Send + Sync>;

/// The in-memory ConfigStoreCache.
#[derive(Default)]
pub struct ConfigStore {
    objects: BTreeMap<ConfigKey, Config>,
    handlers: Vec<(Option<Kind>, Handler)>,
    next_version: u64,
    synced: AtomicBool,
}

impl ConfigStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a handler for one kind (`Some`) or all kinds (`None`).
    pub fn register_event_handler(&mut self, kind: Option<Kind>, handler: Handler) {
        self.handlers.push((kind, handler));
    }

    pub fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<&Config> {
        self.objects.get(&ConfigKey::new(kind, namespace, name))
    }

    /// Objects of `kind`, in one namespace or (with `None`) all.
    pub fn list<'a>(
        &'a self,
        kind: Kind,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Config> + 'a {
        self.objects
            .range(ConfigKey::new(kind, "", "")..)
            .take_while(move |(k, _)| k.kind == kind)
            .filter(move |(k, _)| namespace.is_none_or(|ns| k.namespace == ns))
            .map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    pub fn keys(&self) -> impl Iterator<Item = &ConfigKey> {
        self.objects.keys()
    }

    /// Stores a new object; returns its resource version.
    pub fn create(&mut self, mut config: Config) -> Result<String, StoreError> {
        let key = config.key();
        if self.objects.contains_key(&key) {
            return Err(StoreError::AlreadyExists(key));
        }
        let version = self.bump();
        config.meta.resource_version = version.clone();
        self.objects.insert(key.clone(), config);
        self.notify(EventKind::Add, None, &key);
        Ok(version)
    }

    /// Replaces an object. A non-empty `resource_version` must match the stored one.
    pub fn update(&mut self, mut config: Config) -> Result<String, StoreError> {
        let key = config.key();
        let Some(current) = self.objects.get(&key) else {
            return Err(StoreError::NotFound(key));
        };
        if !config.meta.resource_version.is_empty()
            && config.meta.resource_version != current.meta.resource_version
        {
            return Err(StoreError::Conflict {
                key,
                given: config.meta.resource_version,
                current: current.meta.resource_version.clone(),
            });
        }
        let version = self.bump();
        config.meta.resource_version = version.clone();
        let old = self.objects.insert(key.clone(), config);
        self.notify(EventKind::Update, old.as_ref(), &key);
        Ok(version)
    }

    /// Creates or updates; an update whose content is unchanged is a no-op (`None`),
    /// as an informer's resync is.
    pub fn apply(&mut self, config: Config) -> Option<String> {
        match self.objects.get(&config.key()) {
            Some(current) if current.same_content(&config) => None,
            Some(_) => {
                let mut config = config;
                config.meta.resource_version.clear();
                self.update(config).ok()
            }
            None => self.create(config).ok(),
        }
    }

    pub fn delete(
        &mut self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Config, StoreError> {
        let key = ConfigKey::new(kind, namespace, name);
        let old = self
            .objects
            .remove(&key)
            .ok_or_else(|| StoreError::NotFound(key.clone()))?;
        self.notify(EventKind::Delete, Some(&old), &key);
        Ok(old)
    }

    /// Marks the initial load as complete.
    pub fn mark_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }

    pub fn has_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    fn bump(&mut self) -> String {
        self.next_version += 1;
        self.next_version.to_string()
    }

    fn notify(&self, kind: EventKind, old: Option<&Config>, key: &ConfigKey) {
        let new = if kind == EventKind::Delete {
            None
        } else {
            self.objects.get(key)
        };
        let event = Event { kind, old, new };
        for (filter, handler) in &self.handlers {
            if filter.is_none_or(|k| k == key.kind) {
                handler(&event);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigMeta, Spec, istio};
    use std::sync::{Arc, Mutex};

    fn vs(name: &str, host: &str) -> Config {
        Config {
            meta: ConfigMeta {
                name: name.into(),
                namespace: "default".into(),
                ..Default::default()
            },
            spec: Spec::VirtualService(istio::VirtualService {
                hosts: vec![host.into()],
                ..Default::default()
            }),
        }
    }

    #[test]
    fn crud_with_versions_and_events() {
        let mut store = ConfigStore::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        store.register_event_handler(
            Some(Kind::VirtualService),
            Box::new(move |e| {
                let old = e.old.map(|c| c.meta.resource_version.clone());
                let new = e.new.map(|c| c.meta.resource_version.clone());
                s.lock().unwrap().push((e.kind, old, new));
            }),
        );
        let v1 = store.create(vs("a", "a.com")).unwrap();
        assert_eq!(
            store.create(vs("a", "a.com")),
            Err(StoreError::AlreadyExists(vs("a", "").key()))
        );
        let mut stale = vs("a", "b.com");
        stale.meta.resource_version = "999".into();
        assert!(matches!(
            store.update(stale),
            Err(StoreError::Conflict { .. })
        ));
        let mut next = vs("a", "b.com");
        next.meta.resource_version = v1.clone();
        let v2 = store.update(next).unwrap();
        assert_ne!(v1, v2);
        assert_eq!(store.list(Kind::VirtualService, Some("default")).count(), 1);
        assert_eq!(store.list(Kind::DestinationRule, None).count(), 0);
        store.delete(Kind::VirtualService, "default", "a").unwrap();
        assert!(store.get(Kind::VirtualService, "default", "a").is_none());
        let seen = seen.lock().unwrap();
        assert_eq!(
            *seen,
            vec![
                (EventKind::Add, None, Some(v1.clone())),
                (EventKind::Update, Some(v1), Some(v2.clone())),
                (EventKind::Delete, Some(v2), None),
            ]
        );
    }

    #[test]
    fn apply_skips_unchanged_content() {
        let mut store = ConfigStore::new();
        assert!(store.apply(vs("a", "a.com")).is_some());
        assert!(store.apply(vs("a", "a.com")).is_none());
        assert!(store.apply(vs("a", "b.com")).is_some());
        assert!(!store.has_synced());
        store.mark_synced();
        assert!(store.has_synced());
    }
}
