//! Publishes the mesh root as the `istio-ca-root-cert` ConfigMap in every mesh namespace,
//! as istiod's namespace controller does, and puts it back when someone changes or
//! deletes it. Which namespaces need a write is [`root_cert::plan`] (pure); this task
//! follows Namespaces and those ConfigMaps with watches, and the CA's material.
//!
//! ```text
//!  watch Namespaces ─┐
//!  watch ConfigMaps (metadata.name=istio-ca-root-cert) ─┼─► plan ─► create / update, paced
//!  watch<SigningMaterial> (root bundle), ring ──────────┘      failed ─► again after retry_after
//! ```
//!
//! Every edge runs it, each writing the namespaces it owns on the membership ring, so no
//! leader is needed and writes spread; an edge that has not read the ring yet writes none.

use crate::kubernetes::listed::Listed;
use crate::membership::Ring;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use shoal_proto::security::ca::SigningMaterial;
use shoal_proto::security::root_cert::{
    self, CONFIG_LABEL, CONFIGMAP_NAME, NamespaceFilter, Published, ROOT_CERT_KEY, RootCertWrite,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How the publisher runs.
#[derive(Clone, Debug)]
pub struct RootCertConfig {
    pub filter: NamespaceFilter,
    /// The most ConfigMap writes per second (a new mesh, or a new root, writes one per
    /// namespace).
    pub writes_per_second: u32,
    /// After a failed write, how long until the plan is made again.
    pub retry_after: Duration,
}

impl Default for RootCertConfig {
    fn default() -> Self {
        RootCertConfig {
            filter: NamespaceFilter::default(),
            writes_per_second: 20,
            retry_after: Duration::from_secs(5),
        }
    }
}

/// Which namespaces this edge writes.
#[derive(Clone, Debug)]
pub enum Ownership {
    /// All of them (one edge: the all-in-one).
    All,
    /// Those whose `ns/<name>` the ring gives `me`.
    Ring {
        me: String,
        ring: watch::Receiver<Arc<Ring>>,
    },
}

impl Ownership {
    fn owns(&self, namespace: &str) -> bool {
        match self {
            Ownership::All => true,
            Ownership::Ring { me, ring } => ring.borrow().owns(me, &format!("ns/{namespace}")),
        }
    }

    async fn changed(&mut self) {
        match self {
            Ownership::All => std::future::pending().await,
            Ownership::Ring { ring, .. } => {
                if ring.changed().await.is_err() {
                    std::future::pending::<()>().await
                }
            }
        }
    }
}

/// Keeps the ConfigMaps current until `stop` resolves.
pub async fn run(
    client: kube::Client,
    config: RootCertConfig,
    mut material: watch::Receiver<Arc<SigningMaterial>>,
    mut ownership: Ownership,
    stop: impl Future<Output = ()>,
) {
    let mut stop = std::pin::pin!(stop);
    let mut namespace_events = watcher(
        Api::<Namespace>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .boxed();
    let mut configmap_events = watcher(
        Api::<ConfigMap>::all(client.clone()),
        watcher::Config::default().fields(&format!("metadata.name={CONFIGMAP_NAME}")),
    )
    .default_backoff()
    .boxed();
    let mut namespaces = Listed::<Namespace>::default();
    let mut configmaps = Listed::<ConfigMap>::default();
    let mut dirty = true;
    let mut retry_at: Option<tokio::time::Instant> = None;
    loop {
        if dirty && namespaces.listed() && configmaps.listed() {
            dirty = false;
            let bundle = material.borrow_and_update().root_bundle_pem().to_owned();
            let writes = plan(
                &namespaces,
                &configmaps,
                &bundle,
                &config.filter,
                &ownership,
            );
            let failed = write_all(&client, &config, &configmaps, &bundle, writes).await;
            retry_at = (failed > 0).then(|| tokio::time::Instant::now() + config.retry_after);
        }
        let retry = async {
            match retry_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = &mut stop => return,
            Some(event) = namespace_events.next() => match event {
                Ok(event) => dirty |= namespaces.apply(event),
                Err(error) => tracing::warn!(%error, "istio-ca-root-cert: watching Namespaces failed; retrying"),
            },
            Some(event) = configmap_events.next() => match event {
                Ok(event) => dirty |= configmaps.apply(event),
                Err(error) => tracing::warn!(%error, "istio-ca-root-cert: watching its ConfigMaps failed; retrying"),
            },
            changed = material.changed() => {
                if changed.is_err() {
                    return;
                }
                dirty = true;
            }
            () = ownership.changed() => dirty = true,
            () = retry => {
                retry_at = None;
                dirty = true;
            }
        }
    }
}

fn plan(
    namespaces: &Listed<Namespace>,
    configmaps: &Listed<ConfigMap>,
    bundle: &str,
    filter: &NamespaceFilter,
    ownership: &Ownership,
) -> Vec<RootCertWrite> {
    let empty = BTreeMap::new();
    let published: BTreeMap<&str, Published<'_>> = configmaps
        .iter()
        .filter_map(|cm| {
            Some((
                cm.metadata.namespace.as_deref()?,
                Published {
                    resource_version: cm.metadata.resource_version.as_deref().unwrap_or(""),
                    root_cert: cm
                        .data
                        .as_ref()
                        .and_then(|d| d.get(ROOT_CERT_KEY))
                        .map(String::as_str),
                },
            ))
        })
        .collect();
    let live = namespaces.iter().filter_map(|ns| {
        Some(root_cert::Namespace {
            name: ns.metadata.name.as_deref()?,
            labels: ns.metadata.labels.as_ref().unwrap_or(&empty),
            terminating: ns.metadata.deletion_timestamp.is_some()
                || ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating"),
        })
    });
    root_cert::plan(live, &published, bundle, filter, |ns| ownership.owns(ns))
}

/// Makes the writes, paced; returns how many failed (each is logged with its namespace).
async fn write_all(
    client: &kube::Client,
    config: &RootCertConfig,
    configmaps: &Listed<ConfigMap>,
    bundle: &str,
    writes: Vec<RootCertWrite>,
) -> usize {
    let gap = Duration::from_secs(1) / config.writes_per_second.max(1);
    let mut failed = 0;
    for (i, write) in writes.iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(gap).await;
        }
        let namespace = write.namespace();
        let api = Api::<ConfigMap>::namespaced(client.clone(), namespace);
        let result = match write {
            RootCertWrite::Create { .. } => {
                api.create(&PostParams::default(), &fresh(namespace, bundle))
                    .await
            }
            RootCertWrite::Update { .. } => {
                let current = configmaps
                    .get(namespace, CONFIGMAP_NAME)
                    .cloned()
                    .unwrap_or_else(|| fresh(namespace, bundle));
                api.replace(
                    CONFIGMAP_NAME,
                    &PostParams::default(),
                    &updated(current, bundle),
                )
                .await
            }
        };
        match result {
            Ok(_) => tracing::info!(%namespace, "istio-ca-root-cert: published the mesh root"),
            // Another writer got there first: its change arrives on the watch.
            Err(kube::Error::Api(status)) if status.code == 409 => {
                tracing::debug!(%namespace, reason = %status.message, "istio-ca-root-cert: write raced; planned again")
            }
            Err(error) => {
                failed += 1;
                tracing::warn!(%namespace, %error, "istio-ca-root-cert: not written; retried shortly");
            }
        }
    }
    failed
}

fn fresh(namespace: &str, bundle: &str) -> ConfigMap {
    updated(
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(CONFIGMAP_NAME.into()),
                namespace: Some(namespace.into()),
                ..Default::default()
            },
            ..Default::default()
        },
        bundle,
    )
}

/// The ConfigMap with the bundle and istiod's label; its other keys and labels kept.
fn updated(mut configmap: ConfigMap, bundle: &str) -> ConfigMap {
    configmap
        .data
        .get_or_insert_with(Default::default)
        .insert(ROOT_CERT_KEY.into(), bundle.into());
    configmap
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(CONFIG_LABEL.0.into(), CONFIG_LABEL.1.into());
    configmap
}

#[cfg(test)]
mod tests;
