//! [`Listed`]: the objects a kube-runtime `watcher` reports, kept by namespace/name, with
//! a relist applied atomically (objects missing from it are gone), as a reflector store
//! does but owned by the one task that reads it.

use kube::ResourceExt;
use kube::runtime::watcher::Event;
use std::collections::BTreeMap;

/// The objects of one watch, keyed by `namespace/name`.
#[derive(Debug)]
pub struct Listed<K> {
    objects: BTreeMap<(String, String), K>,
    /// The relist under way: it replaces `objects` at `InitDone`.
    relisting: Option<BTreeMap<(String, String), K>>,
    listed: bool,
}

impl<K> Default for Listed<K> {
    fn default() -> Self {
        Listed {
            objects: BTreeMap::new(),
            relisting: None,
            listed: false,
        }
    }
}

fn key<K: ResourceExt>(object: &K) -> (String, String) {
    (object.namespace().unwrap_or_default(), object.name_any())
}

impl<K: ResourceExt> Listed<K> {
    /// Applies one watch event; true when the objects changed (a relist counts once done).
    pub fn apply(&mut self, event: Event<K>) -> bool {
        match event {
            Event::Apply(object) => {
                self.objects.insert(key(&object), object);
                true
            }
            Event::Delete(object) => self.objects.remove(&key(&object)).is_some(),
            Event::Init => {
                self.relisting = Some(BTreeMap::new());
                false
            }
            Event::InitApply(object) => {
                self.relisting
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key(&object), object);
                false
            }
            Event::InitDone => {
                self.objects = self.relisting.take().unwrap_or_default();
                self.listed = true;
                true
            }
        }
    }

    /// Whether the first list has completed.
    pub fn listed(&self) -> bool {
        self.listed
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<&K> {
        self.objects.get(&(namespace.to_owned(), name.to_owned()))
    }

    pub fn iter(&self) -> impl Iterator<Item = &K> {
        self.objects.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn cm(namespace: &str, name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_relist_replaces_the_objects_at_once_and_drops_the_missing() {
        let mut listed = Listed::default();
        assert!(!listed.apply(Event::Init));
        assert!(!listed.apply(Event::InitApply(cm("a", "x"))));
        assert!(!listed.apply(Event::InitApply(cm("b", "x"))));
        assert!(!listed.listed());
        assert!(listed.apply(Event::InitDone));
        assert!(listed.listed());
        assert!(listed.apply(Event::Apply(cm("c", "x"))));
        assert!(listed.apply(Event::Delete(cm("a", "x"))));
        assert!(!listed.apply(Event::Delete(cm("a", "x"))));
        // A relist after a lost watch: "b" is gone, "d" came, until InitDone nothing moves.
        listed.apply(Event::Init);
        listed.apply(Event::InitApply(cm("c", "x")));
        listed.apply(Event::InitApply(cm("d", "x")));
        assert!(listed.get("b", "x").is_some());
        listed.apply(Event::InitDone);
        let names: Vec<_> = listed.iter().map(|c| c.namespace().unwrap()).collect();
        assert_eq!(names, ["c", "d"]);
    }
}
