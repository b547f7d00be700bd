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
//! Objects go through the directory's parser and validation (`convert`); a rejected
//! object keeps its earlier valid version and shows in `/debug/rejections`. A watch error
//! backs off and retries that watch alone; it never stops the others. Nodes feed Pod
//! localities ([`shoal_proto::config::topology`]); discovery selectors choose namespaces ([`discovery`]); each
//! event's bookkeeping is in `state`. Remote clusters from Istio's remote secrets run one
//! such source each ([`remote`]); `/debug/clusters` shows them all (`clusters`).

mod clusters;
mod convert;
pub mod discovery;
mod object;
pub mod remote;
mod resources;
mod state;

pub use clusters::{ClusterHealth, Clusters};
pub use resources::{REPORTED, Scope, WATCHED, Watched};

use crate::source::{NETWORK_LABEL, Source, SourceSink};
use crate::sync::SyncError;
use discovery::LabelSelector;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, TypeMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use object::ApiObject;
use shoal_proto::config::Kind;
use state::{State, Target};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// One watch: what it feeds, the type of what it lists (`apiVersion`, `kind`), and where.
type Watch = ((Target, TypeMeta), Api<ApiObject>);

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
    /// Istio's system namespace, whose mesh config (ConfigMap `istio`) is read; `None`
    /// (a remote cluster: istiod reads the mesh config of its own cluster only): none.
    pub system_namespace: Option<String>,
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
    fn watches(&self) -> Vec<Watch> {
        let mut watches = Vec::new();
        let watched = WATCHED.iter().map(|w| (w, false));
        for (w, reported_only) in watched.chain(REPORTED.iter().map(|w| (w, true))) {
            let resource = w.api_resource();
            let target = match Kind::from_api(&resource.api_version, w.kind) {
                _ if reported_only => Target::Unsupported(w.kind),
                Some(kind) => Target::Config(kind),
                None => Target::Nodes,
            };
            let target = (target, convert::types_of(&resource));
            match w.scope {
                Scope::System => {
                    if let Some(ns) = &self.config.system_namespace {
                        watches.push((
                            target.clone(),
                            Api::namespaced_with(self.client.clone(), ns, &resource),
                        ));
                    }
                }
                Scope::Cluster => {
                    watches.push((target, Api::all_with(self.client.clone(), &resource)));
                }
                Scope::Namespaced if self.config.namespaces.is_empty() => {
                    watches.push((target, Api::all_with(self.client.clone(), &resource)));
                }
                Scope::Namespaced => {
                    for ns in &self.config.namespaces {
                        watches.push((
                            target.clone(),
                            Api::namespaced_with(self.client.clone(), ns, &resource),
                        ));
                    }
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
            .map(|(index, ((target, types), api))| {
                // A real API server lists built-in kinds' items without apiVersion and
                // kind: every object is typed by the resource watched, never by itself.
                let types = Arc::new(types);
                watcher::watcher(api, watcher::Config::default())
                    .default_backoff()
                    .map(move |event| (index, (target, types.clone()), event))
                    .boxed()
            });
        let mut events = futures::stream::select_all(streams);
        tokio::pin!(shutdown);
        loop {
            let (index, (target, types), event) = tokio::select! {
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
                    state.on_event(&mut sink, &origin, index, (target, &*types), event);
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
                sink.set_rejections(state.rejections());
            }
            if std::mem::take(&mut state.warnings_changed) {
                sink.set_warnings(state.warned.values().flatten().cloned().collect());
            }
            let rejected = &state.rejected;
            if state.synced {
                sink.commit(true, None, |k| rejected.contains_key(k))
                    .await?;
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

/// How long the network lookup on a cluster's system namespace may take before the
/// cluster is followed without one.
const NETWORK_LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// The cluster's network: the `topology.istio.io/network` label of its system namespace,
/// as Istio reads it; empty when unlabelled or not readable in time.
pub async fn network_of(client: &kube::Client, system_namespace: &str) -> String {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match tokio::time::timeout(NETWORK_LOOKUP_TIMEOUT, namespaces.get_opt(system_namespace)).await {
        Ok(Ok(Some(ns))) => ns
            .metadata
            .labels
            .and_then(|l| l.get(NETWORK_LABEL).cloned())
            .unwrap_or_default(),
        Ok(Ok(None)) => String::new(),
        Ok(Err(error)) => {
            tracing::warn!(%error, "reading the cluster's system namespace for its network failed; none");
            String::new()
        }
        Err(_) => {
            tracing::warn!("the cluster's API server did not answer in time for its network; none");
            String::new()
        }
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
async fn served(watches: Vec<Watch>) -> Vec<Watch> {
    let mut served = Vec::with_capacity(watches.len());
    for (target, api) in watches {
        match api.list(&ListParams::default().limit(1)).await {
            Err(kube::Error::Api(status)) if status.is_not_found() => {
                let kind = &target.0;
                tracing::warn!(%kind, "the API server does not serve this kind (CRD not installed?); not watching it");
            }
            _ => served.push((target, api)),
        }
    }
    served
}

#[cfg(test)]
mod tests;
