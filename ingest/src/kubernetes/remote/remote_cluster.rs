//! One remote cluster: its ingest's lifetime, from its secret's kubeconfig to its stop,
//! and the removal of its config once no secret names it.

use super::RemoteClustersConfig;
use crate::kubernetes::{ClusterHealth, Clusters, KubeError, KubeSource, SOURCE, network_of};
use crate::metrics::Metrics;
use crate::source::{Source, SourceSink};
use crate::{Ingest, IngestError};
use kube::config::{KubeConfigOptions, Kubeconfig};
use shoal_infra::runtime::Drain;
use shoal_proto::transport::{Bus, ConfigKv};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tracing::Instrument;

/// What every remote's ingest shares with the primary's.
pub(super) struct Shared {
    pub kv: Arc<dyn ConfigKv>,
    pub bus: Arc<dyn Bus>,
    pub metrics: Metrics,
    pub clusters: Clusters,
}

/// A running remote cluster's ingest.
pub(super) struct RemoteCluster {
    /// The kubeconfig it was started with: a secret with another one restarts it.
    pub kubeconfig: String,
    id: String,
    drain: Drain,
    task: Option<JoinHandle<()>>,
}

impl RemoteCluster {
    /// Starts following the cluster `id` named by `secret`. A kubeconfig that cannot be
    /// read is reported (log, `/debug/clusters`) and the cluster is not followed until
    /// its secret changes; it never stops the other clusters.
    pub async fn start(
        shared: &Shared,
        config: &RemoteClustersConfig,
        id: &str,
        secret: &str,
        kubeconfig: String,
    ) -> RemoteCluster {
        let drain = Drain::new();
        let mut remote = RemoteCluster {
            kubeconfig,
            id: id.to_string(),
            drain,
            task: None,
        };
        let ingest_config = {
            let mut c = config.ingest.clone();
            c.cluster_id = id.to_string();
            c.network.clear();
            c
        };
        let ingest = Ingest::with_metrics(
            ingest_config,
            shared.kv.clone(),
            shared.bus.clone(),
            shared.metrics.clone(),
        );
        let handle = ingest.handle();
        let health = ClusterHealth::new(
            id,
            "",
            secret,
            handle.readiness(),
            handle.rejections().clone(),
        );
        shared.clusters.insert(id, health.clone());
        let client = match client(&remote.kubeconfig).await {
            Ok(client) => client,
            Err(error) => {
                tracing::error!(cluster = %id, %secret, %error, "remote secret: cannot use its kubeconfig; cluster not followed");
                health.failed(&format!("kubeconfig: {error}"));
                return remote;
            }
        };
        let source =
            KubeSource::new(client.clone(), config.source.clone()).with_health(health.clone());
        let system_namespace = config.system_namespace.clone();
        let watch = remote.drain.watcher();
        let span = tracing::info_span!("remote", cluster = %id);
        let cluster = id.to_string();
        let task = async move {
            let network = network_of(&client, &system_namespace).await;
            health.set_network(&network);
            let ingest = ingest.with_network(&network);
            if let Err(error) = ingest
                .run_source(source, tracing::Span::current(), watch)
                .await
            {
                tracing::error!(%cluster, %error, "remote cluster's ingest stopped");
                health.failed(&error.to_string());
            }
        };
        remote.task = Some(tokio::spawn(task.instrument(span)));
        remote
    }

    /// Stops following the cluster; its objects stay in the KV.
    pub async fn stop(mut self, grace: Duration) {
        self.drain.signal();
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(grace, &mut task).await.is_err()
        {
            tracing::warn!(cluster = %self.id, "remote cluster's ingest did not stop in time; aborted");
            task.abort();
        }
    }
}

/// Deletes every object of the remote cluster `id` from the KV (one full push), and its
/// entry from `/debug/clusters`.
pub(super) async fn forget(
    shared: &Shared,
    config: &RemoteClustersConfig,
    id: &str,
) -> Result<(), IngestError> {
    shared.clusters.remove(id);
    let mut ingest_config = config.ingest.clone();
    ingest_config.cluster_id = id.to_string();
    let ingest = Ingest::with_metrics(
        ingest_config,
        shared.kv.clone(),
        shared.bus.clone(),
        shared.metrics.clone(),
    );
    let drain = Drain::new();
    let span = tracing::info_span!("remote_removed", cluster = %id);
    ingest.run_source(Departed, span, drain.watcher()).await
}

/// The source of a cluster that left the mesh: it holds nothing, so reporting it synced
/// reconciles every key the cluster's Kubernetes source owns away, with one full push.
struct Departed;

impl Source for Departed {
    const NAME: &'static str = SOURCE;
    type Error = KubeError;

    async fn run(
        self,
        mut sink: SourceSink,
        _shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), KubeError> {
        sink.synced(|_| false).await.map_err(KubeError::from)
    }
}

/// A client for a remote secret's kubeconfig (its current context).
async fn client(kubeconfig: &str) -> Result<kube::Client, String> {
    let file = Kubeconfig::from_yaml(kubeconfig).map_err(|e| e.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}
