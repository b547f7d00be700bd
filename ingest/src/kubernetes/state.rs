//! What the watches of one Kubernetes source have delivered, and what each event does to
//! the sink: per watch, the keys it holds and its relist in progress; the objects
//! rejected now; Node localities; the namespaces the discovery selectors choose.

use super::convert::{self, Converted};
use super::discovery::{Discovery, LabelSelector, Selection};
use super::object::ApiObject;
use crate::registry::{Rejection, Warning};
use crate::source::SourceSink;
use kube::api::TypeMeta;
use kube::runtime::watcher::Event;
use shoal_proto::config::topology::NodeLocalities;
use shoal_proto::config::{ConfigKey, Kind};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// What one watch feeds.
#[derive(Clone, Copy, Debug)]
pub(super) enum Target {
    /// Mesh config of one kind.
    Config(Kind),
    /// Node localities, written onto Pods.
    Nodes,
    /// A kind Shoal does not implement (an AuthorizationPolicy…), watched only to report
    /// its objects as unsupported, like rejections.
    Unsupported(&'static str),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Config(kind) => kind.fmt(f),
            Target::Nodes => f.write_str("Node"),
            Target::Unsupported(kind) => f.write_str(kind),
        }
    }
}

/// What the watches have delivered: per watch, the keys it holds and its relist in
/// progress; the objects rejected now; Node localities.
pub(super) struct State {
    held: Vec<BTreeSet<ConfigKey>>,
    relisting: Vec<Option<BTreeSet<ConfigKey>>>,
    listed: Vec<bool>,
    pub(super) rejected: BTreeMap<ConfigKey, Rejection>,
    /// Objects of kinds Shoal does not implement, by (watch, namespace, name): reported
    /// with the rejections.
    pub(super) unsupported: BTreeMap<(usize, String, String), Rejection>,
    /// `rejected` changed since the sink was last told.
    pub(super) rejections_changed: bool,
    /// The warnings of accepted objects, by object.
    pub(super) warned: BTreeMap<ConfigKey, Vec<Warning>>,
    /// `warned` changed since the sink was last told.
    pub(super) warnings_changed: bool,
    /// Every watch listed once and the sink was told (HasSynced).
    pub(super) synced: bool,
    nodes: NodeLocalities,
    discovery: Discovery,
    /// The Nodes a relist in progress has seen.
    relisting_nodes: Option<BTreeSet<String>>,
}

impl State {
    pub(super) fn new(watches: usize, selectors: Vec<LabelSelector>) -> Self {
        Self {
            held: vec![BTreeSet::new(); watches],
            relisting: vec![None; watches],
            listed: vec![false; watches],
            rejected: BTreeMap::new(),
            unsupported: BTreeMap::new(),
            rejections_changed: false,
            warned: BTreeMap::new(),
            warnings_changed: false,
            synced: false,
            nodes: NodeLocalities::default(),
            discovery: Discovery::new(selectors),
            relisting_nodes: None,
        }
    }

    pub(super) fn all_listed(&self) -> bool {
        self.listed.iter().all(|l| *l)
    }

    /// `key` is no longer rejected (valid again, or gone).
    fn accept(&mut self, key: &ConfigKey) {
        self.rejections_changed |= self.rejected.remove(key).is_some();
    }

    pub(super) fn on_event(
        &mut self,
        sink: &mut SourceSink,
        origin: &str,
        index: usize,
        (target, types): (Target, &TypeMeta),
        event: Event<ApiObject>,
    ) {
        let kind = match target {
            Target::Config(kind) => kind,
            Target::Nodes => return self.on_node_event(sink, index, event),
            Target::Unsupported(_) => {
                return self.on_unsupported_event(origin, index, types, event);
            }
        };
        match event {
            Event::Init => self.relisting[index] = Some(BTreeSet::new()),
            Event::InitApply(object) => {
                if let Some(key) = self.apply(sink, origin, (kind, types), &object) {
                    self.relisting[index].get_or_insert_default().insert(key);
                }
            }
            Event::InitDone => {
                // What the relist lacks was deleted while the watch was down.
                let listed = self.relisting[index].take().unwrap_or_default();
                for gone in self.held[index]
                    .difference(&listed)
                    .cloned()
                    .collect::<Vec<_>>()
                {
                    self.remove(sink, &gone);
                }
                self.held[index] = listed;
                self.listed[index] = true;
            }
            Event::Apply(object) => {
                if let Some(key) = self.apply(sink, origin, (kind, types), &object) {
                    self.held[index].insert(key);
                }
            }
            Event::Delete(object) => {
                if let Some(key) = convert::key_of(kind, &object) {
                    self.held[index].remove(&key);
                    self.remove(sink, &key);
                }
            }
        }
    }

    /// Every rejection to report: rejected objects, then objects of unsupported kinds.
    pub(super) fn rejections(&self) -> Vec<Rejection> {
        self.rejected
            .values()
            .chain(self.unsupported.values())
            .cloned()
            .collect()
    }

    /// An object of a kind Shoal does not implement: reported while it exists. A relist
    /// starts the watch's reports afresh.
    fn on_unsupported_event(
        &mut self,
        origin: &str,
        index: usize,
        types: &TypeMeta,
        event: Event<ApiObject>,
    ) {
        let id = |o: &ApiObject| {
            (
                index,
                o.metadata.namespace.clone().unwrap_or_default(),
                o.metadata.name.clone().unwrap_or_default(),
            )
        };
        match event {
            Event::Init => {
                let before = self.unsupported.len();
                self.unsupported.retain(|(i, _, _), _| *i != index);
                self.rejections_changed |= self.unsupported.len() != before;
            }
            Event::InitApply(object) | Event::Apply(object) => {
                if let Converted::Rejected(report) = convert::convert(&object, types, origin) {
                    self.unsupported.insert(id(&object), report);
                    self.rejections_changed = true;
                }
            }
            Event::InitDone => self.listed[index] = true,
            Event::Delete(object) => {
                self.rejections_changed |= self.unsupported.remove(&id(&object)).is_some();
            }
        }
    }

    /// An object is gone (deleted, or missing from a relist).
    fn remove(&mut self, sink: &mut SourceSink, key: &ConfigKey) {
        self.accept(key);
        self.warnings_changed |= self.warned.remove(key).is_some();
        self.nodes.forget_pod(key);
        self.discovery.unpark_key(key);
        sink.delete(key);
        if key.kind == Kind::Namespace {
            let selection = self.discovery.namespace(&key.name, None);
            self.on_selection(sink, &key.name, selection);
        }
    }

    /// A namespace entered the discovery selection (its parked objects are read) or
    /// left it (its objects are parked).
    fn on_selection(&mut self, sink: &mut SourceSink, namespace: &str, selection: Selection) {
        match selection {
            Selection::Unchanged => {}
            Selection::Selected => {
                for config in self.discovery.unpark(namespace) {
                    // Its Node may have moved while it was parked.
                    let config = self.nodes.restamped(&config).unwrap_or(config);
                    sink.apply(config);
                }
            }
            Selection::Unselected => {
                let keys: Vec<ConfigKey> = self
                    .held
                    .iter()
                    .flatten()
                    .filter(|k| k.namespace == namespace && !ignores_discovery(k.kind))
                    .cloned()
                    .collect();
                for key in keys {
                    if let Some(config) = sink.get(&key).cloned() {
                        sink.delete(&key);
                        self.discovery.park(config);
                    }
                }
            }
        }
    }

    /// A Node event: its locality, rewritten onto its Pods when it moved.
    fn on_node_event(&mut self, sink: &mut SourceSink, index: usize, event: Event<ApiObject>) {
        let name = |object: &ApiObject| object.metadata.name.clone().unwrap_or_default();
        match event {
            Event::Init => self.relisting_nodes = Some(BTreeSet::new()),
            Event::InitApply(node) => {
                self.relisting_nodes
                    .get_or_insert_default()
                    .insert(name(&node));
                self.set_node(sink, &node);
            }
            Event::InitDone => {
                let listed = self.relisting_nodes.take().unwrap_or_default();
                for gone in self.nodes.nodes() {
                    if !listed.contains(&gone) {
                        self.nodes.remove_node(&gone);
                    }
                }
                self.listed[index] = true;
            }
            Event::Apply(node) => self.set_node(sink, &node),
            Event::Delete(node) => self.nodes.remove_node(&name(&node)),
        }
    }

    fn set_node(&mut self, sink: &mut SourceSink, node: &ApiObject) {
        let Some(name) = &node.metadata.name else {
            return;
        };
        let labels = node.metadata.labels.clone().unwrap_or_default();
        for pod in self.nodes.set_node(name, &labels) {
            if let Some(moved) = sink.get(&pod).and_then(|p| self.nodes.restamped(p)) {
                sink.apply(moved);
            }
        }
    }

    /// Records the warnings of the version of `key` now accepted.
    fn set_warnings(&mut self, origin: &str, key: &ConfigKey, warnings: &[String]) {
        let warnings: Vec<Warning> = warnings
            .iter()
            .map(|w| Warning::new(origin, 1, key, w))
            .collect();
        let changed = match self.warned.get(key) {
            Some(old) => *old != warnings,
            None => !warnings.is_empty(),
        };
        if !changed {
            return;
        }
        if warnings.is_empty() {
            self.warned.remove(key);
        } else {
            self.warned.insert(key.clone(), warnings);
        }
        self.warnings_changed = true;
    }

    /// Applies one object; its key, or `None` when it names none.
    fn apply(
        &mut self,
        sink: &mut SourceSink,
        origin: &str,
        (kind, types): (Kind, &TypeMeta),
        object: &ApiObject,
    ) -> Option<ConfigKey> {
        let key = convert::key_of(kind, object)?;
        match convert::convert(object, types, origin) {
            Converted::Config(mut config, warnings) => {
                for warning in &warnings {
                    tracing::warn!(%key, "{warning}");
                }
                self.set_warnings(origin, &key, &warnings);
                self.accept(&key);
                sink.stamp(&mut config);
                self.nodes.stamp(&mut config);
                if kind == Kind::Namespace {
                    let labels = config.meta.labels.clone();
                    sink.apply(*config);
                    let selection = self.discovery.namespace(&key.name, Some(&labels));
                    self.on_selection(sink, &key.name, selection);
                } else if ignores_discovery(kind) || self.discovery.is_selected(&key.namespace) {
                    sink.apply(*config);
                } else {
                    // Read while its namespace was selected, perhaps: not any more.
                    sink.delete(&key);
                    self.discovery.park(*config);
                }
            }
            Converted::Rejected(rejection) => {
                sink.count_rejection(&rejection);
                self.rejected.insert(key.clone(), rejection);
                self.rejections_changed = true;
            }
            Converted::Skipped => return None,
        }
        Some(key)
    }
}

/// Kinds read whatever the discovery selectors select: Namespaces themselves, and the
/// mesh config (istiod reads it from the system namespace even when unselected).
fn ignores_discovery(kind: Kind) -> bool {
    matches!(kind, Kind::Namespace | Kind::MeshConfig)
}
