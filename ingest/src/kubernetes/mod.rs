//! The Kubernetes registry: every kind Shoal reads, watched on the API server through
//! kube-runtime watchers (list, then watch; relist after `410 Gone`; bookmarks), fed into
//! the [`SourceSink`] as the directory's objects are.
//!
//! ```text
//!  watcher per kind (and namespace) ──► Init / InitApply… / InitDone ──► apply; delete what the relist lacks
//!                                   ──► Apply / Delete ──► apply / delete ──► commit (KV, pushes)
//!  every kind's first InitDone ──► SourceSink::synced (Istio's HasSynced): reconcile, full push, ready
//! ```
//!
//! Objects go through the directory's parser and validation ([`convert`]); a rejected
//! object keeps its earlier valid version and shows in `/debug/rejections`. A watch error
//! backs off and retries that watch alone; it never stops the others.

mod clusters;
mod convert;
pub mod discovery;
mod nodes;
pub mod remote;
mod resources;

pub use clusters::{ClusterHealth, Clusters};
pub use resources::{WATCHED, Watched};

use crate::registry::Rejection;
use crate::source::{Source, SourceSink};
use crate::sync::SyncError;
use convert::Converted;
use discovery::{Discovery, LabelSelector, Selection};
use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use nodes::NodeLocalities;
use shoal_proto::config::{ConfigKey, Kind};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;

/// The Kubernetes registry's source name: its objects' `Origin::source` and KV key segment.
pub const SOURCE: &str = "kubernetes";

/// Errors that stop the Kubernetes registry.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    #[error("kubernetes client: {0}")]
    Client(String),
    #[error(transparent)]
    Sync(#[from] SyncError),
}

/// What the registry watches.
#[derive(Clone, Debug, Default)]
pub struct KubeSourceConfig {
    /// Namespaces whose objects are read (by name; only these are watched); empty: all.
    /// Namespaces themselves are always read.
    pub namespaces: Vec<String>,
    /// Istio's discovery selectors: of those namespaces, only the ones whose labels one
    /// of these matches are read; empty: all.
    pub discovery_selectors: Vec<LabelSelector>,
}

/// The Kubernetes registry, on one cluster's API server.
pub struct KubeSource {
    client: kube::Client,
    config: KubeSourceConfig,
    health: Option<ClusterHealth>,
}

impl KubeSource {
    pub fn new(client: kube::Client, config: KubeSourceConfig) -> Self {
        Self {
            client,
            config,
            health: None,
        }
    }

    /// Reports whether the API server answers to `health` (`/debug/clusters`).
    pub fn with_health(mut self, health: ClusterHealth) -> Self {
        self.health = Some(health);
        self
    }

    /// One watch per kind, or per kind and namespace when limited to some.
    fn watches(&self) -> Vec<(Target, Api<DynamicObject>)> {
        let mut watches = Vec::new();
        for w in WATCHED {
            let resource = w.api_resource();
            let kind = match Kind::from_api(&resource.api_version, w.kind) {
                Some(kind) => Target::Config(kind),
                None => Target::Nodes,
            };
            if !w.namespaced || self.config.namespaces.is_empty() {
                watches.push((kind, Api::all_with(self.client.clone(), &resource)));
            } else {
                for ns in &self.config.namespaces {
                    watches.push((
                        kind,
                        Api::namespaced_with(self.client.clone(), ns, &resource),
                    ));
                }
            }
        }
        watches
    }
}

impl Source for KubeSource {
    const NAME: &'static str = SOURCE;
    type Error = KubeError;

    async fn run(
        self,
        mut sink: SourceSink,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), KubeError> {
        let origin = format!("kubernetes/{}", sink.origin().cluster);
        let watches = served(self.watches()).await;
        let mut state = State::new(watches.len(), self.config.discovery_selectors.clone());
        let streams = watches
            .into_iter()
            .enumerate()
            .map(|(index, (target, api))| {
                watcher::watcher(api, watcher::Config::default())
                    .default_backoff()
                    .map(move |event| (index, target, event))
                    .boxed()
            });
        let mut events = futures::stream::select_all(streams);
        tokio::pin!(shutdown);
        loop {
            let (index, target, event) = tokio::select! {
                () = &mut shutdown => break,
                next = events.next() => match next {
                    Some(next) => next,
                    None => break,
                },
            };
            match event {
                Ok(event) => {
                    if let Some(health) = &self.health {
                        health.reachable();
                    }
                    state.on_event(&mut sink, &origin, index, target, event);
                }
                Err(error) => {
                    tracing::warn!(kind = %target, %error, "kubernetes watch failed; retrying with backoff");
                    if let Some(health) = &self.health
                        && unreachable(&error)
                    {
                        health.failed(&error.to_string());
                    }
                    continue;
                }
            }
            if std::mem::take(&mut state.rejections_changed) {
                sink.set_rejections(state.rejected.values().cloned().collect());
            }
            let rejected = &state.rejected;
            if state.synced {
                sink.commit(true, |k| rejected.contains_key(k)).await?;
            } else if state.all_listed() {
                sink.synced(|k| rejected.contains_key(k)).await?;
                tracing::info!(
                    objects = sink.len(),
                    rejected = rejected.len(),
                    "kubernetes API listed: every watch synced"
                );
                state.synced = true;
            }
        }
        tracing::debug!("kubernetes registry stopped");
        Ok(())
    }
}

/// Whether a watch error means the API server could not be reached, rather than that it
/// answered with an error (`410 Gone` and other statuses are answers).
fn unreachable(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::WatchError(_) | watcher::Error::NoResourceVersion => false,
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => !matches!(e, kube::Error::Api(_)),
    }
}

/// The watches whose kind the API server serves. A kind it does not (Istio's CRDs not
/// installed on this cluster) is left out with a warning, as Istio skips absent CRDs:
/// its watcher would never list, and the source would never report synced. Any other
/// error keeps the watch: the watcher retries it with backoff.
async fn served(watches: Vec<(Target, Api<DynamicObject>)>) -> Vec<(Target, Api<DynamicObject>)> {
    let mut served = Vec::with_capacity(watches.len());
    for (kind, api) in watches {
        match api.list(&ListParams::default().limit(1)).await {
            Err(kube::Error::Api(status)) if status.is_not_found() => {
                tracing::warn!(%kind, "the API server does not serve this kind (CRD not installed?); not watching it");
            }
            _ => served.push((kind, api)),
        }
    }
    served
}

/// What one watch feeds.
#[derive(Clone, Copy, Debug)]
enum Target {
    /// Mesh config of one kind.
    Config(Kind),
    /// Node localities, written onto Pods.
    Nodes,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Config(kind) => kind.fmt(f),
            Target::Nodes => f.write_str("Node"),
        }
    }
}

/// What the watches have delivered: per watch, the keys it holds and its relist in
/// progress; the objects rejected now; Node localities.
struct State {
    held: Vec<BTreeSet<ConfigKey>>,
    relisting: Vec<Option<BTreeSet<ConfigKey>>>,
    listed: Vec<bool>,
    rejected: BTreeMap<ConfigKey, Rejection>,
    /// `rejected` changed since the sink was last told.
    rejections_changed: bool,
    /// Every watch listed once and the sink was told (HasSynced).
    synced: bool,
    nodes: NodeLocalities,
    discovery: Discovery,
    /// The Nodes a relist in progress has seen.
    relisting_nodes: Option<BTreeSet<String>>,
}

impl State {
    fn new(watches: usize, selectors: Vec<LabelSelector>) -> Self {
        Self {
            held: vec![BTreeSet::new(); watches],
            relisting: vec![None; watches],
            listed: vec![false; watches],
            rejected: BTreeMap::new(),
            rejections_changed: false,
            synced: false,
            nodes: NodeLocalities::default(),
            discovery: Discovery::new(selectors),
            relisting_nodes: None,
        }
    }

    fn all_listed(&self) -> bool {
        self.listed.iter().all(|l| *l)
    }

    /// `key` is no longer rejected (valid again, or gone).
    fn accept(&mut self, key: &ConfigKey) {
        self.rejections_changed |= self.rejected.remove(key).is_some();
    }

    fn on_event(
        &mut self,
        sink: &mut SourceSink,
        origin: &str,
        index: usize,
        target: Target,
        event: Event<DynamicObject>,
    ) {
        let kind = match target {
            Target::Config(kind) => kind,
            Target::Nodes => return self.on_node_event(sink, index, event),
        };
        match event {
            Event::Init => self.relisting[index] = Some(BTreeSet::new()),
            Event::InitApply(object) => {
                if let Some(key) = self.apply(sink, origin, kind, &object) {
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
                if let Some(key) = self.apply(sink, origin, kind, &object) {
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

    /// An object is gone (deleted, or missing from a relist).
    fn remove(&mut self, sink: &mut SourceSink, key: &ConfigKey) {
        self.accept(key);
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
                    .filter(|k| k.namespace == namespace && k.kind != Kind::Namespace)
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
    fn on_node_event(&mut self, sink: &mut SourceSink, index: usize, event: Event<DynamicObject>) {
        let name = |object: &DynamicObject| object.metadata.name.clone().unwrap_or_default();
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

    fn set_node(&mut self, sink: &mut SourceSink, node: &DynamicObject) {
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

    /// Applies one object; its key, or `None` when it names none.
    fn apply(
        &mut self,
        sink: &mut SourceSink,
        origin: &str,
        kind: Kind,
        object: &DynamicObject,
    ) -> Option<ConfigKey> {
        let key = convert::key_of(kind, object)?;
        match convert::convert(object, origin) {
            Converted::Config(mut config, warnings) => {
                for warning in warnings {
                    tracing::warn!(%key, "{warning}");
                }
                self.accept(&key);
                sink.stamp(&mut config);
                self.nodes.stamp(&mut config);
                if kind == Kind::Namespace {
                    let labels = config.meta.labels.clone();
                    sink.apply(*config);
                    let selection = self.discovery.namespace(&key.name, Some(&labels));
                    self.on_selection(sink, &key.name, selection);
                } else if self.discovery.is_selected(&key.namespace) {
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

#[cfg(test)]
mod tests;
