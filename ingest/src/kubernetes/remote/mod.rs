//! Remote clusters from Istio's remote secrets: an ingest on the primary cluster also
//! follows every cluster whose kubeconfig a Secret labelled `istio/multiCluster: "true"`
//! in the system namespace holds (what `istioctl create-remote-secret` writes: one data
//! key per cluster ID, its value a kubeconfig), each under its own cluster ID.
//!
//! ```text
//!  watch Secrets (system namespace, istio/multiCluster=true) on the local API server
//!    ──► desired: cluster ID → (secret, kubeconfig)
//!    ──► new cluster: start its ingest (KubeSource on its API server, its own cluster ID,
//!        its network from the label on its system namespace)
//!    ──► kubeconfig changed: restart it (its objects stay in the KV meanwhile)
//!    ──► gone from every secret: stop it, delete its KV keys, one full push
//! ```
//!
//! A remote whose API server cannot be reached keeps its last objects until it answers
//! again or its secret is removed (`/debug/clusters` shows it unreachable). Stopping the
//! ingest itself deletes nothing: a restart must not drop a remote's endpoints.

mod remote_cluster;

use super::{Clusters, KubeSourceConfig};
use crate::{Ingest, IngestConfig, IngestError};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use remote_cluster::RemoteCluster;
use shoal_infra::runtime::DrainWatch;
use shoal_proto::transport::{Bus, ConfigKv};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The label that marks a Secret as a remote secret.
pub const MULTICLUSTER_LABEL: &str = "istio/multiCluster";

/// How remote clusters are followed.
#[derive(Clone, Debug)]
pub struct RemoteClustersConfig {
    /// Where remote secrets live, and the namespace whose `topology.istio.io/network`
    /// label names each cluster's network (Istio's system namespace).
    pub system_namespace: String,
    /// Each remote's ingest settings (debounce, queues, retry); its cluster ID and network
    /// are the remote's.
    pub ingest: IngestConfig,
    /// What each remote's source watches.
    pub source: KubeSourceConfig,
    /// How long a remote's ingest may take to stop.
    pub stop_grace: Duration,
}

/// Follows remote secrets and runs one ingest per remote cluster.
pub struct RemoteClusters {
    client: kube::Client,
    config: RemoteClustersConfig,
    shared: remote_cluster::Shared,
}

/// The remotes the secrets name now: cluster ID → (secret, kubeconfig).
type Desired = BTreeMap<String, (String, String)>;

impl RemoteClusters {
    /// Remote clusters named by secrets on `client`'s API server, written to `kv` and
    /// pushed on `bus` as `beside`'s (the primary's) are, counted in its metrics, and
    /// shown in `clusters`.
    pub fn new(
        client: kube::Client,
        config: RemoteClustersConfig,
        kv: Arc<dyn ConfigKv>,
        bus: Arc<dyn Bus>,
        beside: &Ingest,
        clusters: Clusters,
    ) -> Self {
        Self {
            client,
            config,
            shared: remote_cluster::Shared {
                kv,
                bus,
                metrics: beside.metrics().clone(),
                clusters,
            },
        }
    }

    /// Follows the secrets until `drain`; then stops every remote's ingest, keeping
    /// their objects.
    pub async fn run(self, drain: DrainWatch) -> Result<(), IngestError> {
        let namespace = &self.config.system_namespace;
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let selector = format!("{MULTICLUSTER_LABEL}=true");
        let mut events = watcher::watcher(secrets, watcher::Config::default().labels(&selector))
            .default_backoff()
            .boxed();
        let mut by_secret: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        let mut relist: Option<BTreeMap<String, BTreeMap<String, String>>> = None;
        let mut running: BTreeMap<String, RemoteCluster> = BTreeMap::new();
        let shutdown = drain.wait();
        tokio::pin!(shutdown);
        tracing::info!(%namespace, "following remote secrets");
        loop {
            let event = tokio::select! {
                () = &mut shutdown => break,
                event = events.next() => match event {
                    Some(event) => event,
                    None => break,
                },
            };
            let changed = match event {
                Ok(Event::Init) => {
                    relist = Some(BTreeMap::new());
                    false
                }
                Ok(Event::InitApply(secret)) => {
                    let (name, clusters) = read_secret(namespace, &secret);
                    relist.get_or_insert_default().insert(name, clusters);
                    false
                }
                Ok(Event::InitDone) => {
                    by_secret = relist.take().unwrap_or_default();
                    true
                }
                Ok(Event::Apply(secret)) => {
                    let (name, clusters) = read_secret(namespace, &secret);
                    by_secret.insert(name, clusters);
                    true
                }
                Ok(Event::Delete(secret)) => {
                    let (name, _) = read_secret(namespace, &secret);
                    by_secret.remove(&name);
                    true
                }
                Err(error) => {
                    tracing::warn!(%error, "watching remote secrets failed; retrying with backoff");
                    false
                }
            };
            if changed {
                let desired = desired(&by_secret, &self.config.ingest.cluster_id);
                self.reconcile(&mut running, desired).await;
            }
        }
        // Every remote drains at once: the ingest's own drain grace bounds them all.
        let grace = self.config.stop_grace;
        futures::future::join_all(running.into_values().map(|r| r.stop(grace))).await;
        Ok(())
    }

    /// Starts, restarts and removes remotes until `running` matches `desired`.
    async fn reconcile(&self, running: &mut BTreeMap<String, RemoteCluster>, desired: Desired) {
        let gone: Vec<String> = running
            .iter()
            .filter(|(id, remote)| {
                desired
                    .get(*id)
                    .is_none_or(|(_, kubeconfig)| *kubeconfig != remote.kubeconfig)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            let Some(remote) = running.remove(&id) else {
                continue;
            };
            remote.stop(self.config.stop_grace).await;
            if !desired.contains_key(&id) {
                tracing::info!(cluster = %id, "remote cluster removed: deleting its config");
                if let Err(error) = remote_cluster::forget(&self.shared, &self.config, &id).await {
                    tracing::error!(cluster = %id, %error, "deleting a removed cluster's config failed");
                }
            }
        }
        for (id, (secret, kubeconfig)) in desired {
            if running.contains_key(&id) {
                continue;
            }
            tracing::info!(cluster = %id, %secret, "remote cluster added");
            let remote =
                RemoteCluster::start(&self.shared, &self.config, &id, &secret, kubeconfig).await;
            running.insert(id, remote);
        }
    }
}

/// A remote secret's `namespace/name` and its clusters: data key → kubeconfig text.
fn read_secret(namespace: &str, secret: &Secret) -> (String, BTreeMap<String, String>) {
    let name = format!(
        "{namespace}/{}",
        secret.metadata.name.as_deref().unwrap_or_default()
    );
    let mut clusters = BTreeMap::new();
    for (id, value) in secret.data.iter().flatten() {
        match String::from_utf8(value.0.clone()) {
            Ok(kubeconfig) => {
                clusters.insert(id.clone(), kubeconfig);
            }
            Err(_) => {
                tracing::error!(secret = %name, cluster = %id, "remote secret: the kubeconfig is not UTF-8; cluster ignored");
            }
        }
    }
    (name, clusters)
}

/// Cluster ID → (secret, kubeconfig) over every secret, in secret name order: a cluster
/// named twice is taken from the first secret, and this ingest's own cluster is never a
/// remote (Istio ignores it too).
fn desired(by_secret: &BTreeMap<String, BTreeMap<String, String>>, local: &str) -> Desired {
    let mut out = Desired::new();
    for (secret, clusters) in by_secret {
        for (id, kubeconfig) in clusters {
            if id == local {
                tracing::warn!(%secret, cluster = %id, "a remote secret names this ingest's own cluster; ignored");
                continue;
            }
            if let Some((first, _)) = out.get(id) {
                tracing::warn!(%secret, cluster = %id, %first, "cluster already named by another remote secret; ignored");
                continue;
            }
            out.insert(id.clone(), (secret.clone(), kubeconfig.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests;
