//! Config sources: the registries an ingest follows (the directory today; the Kubernetes
//! API next), each behind [`Source`], all feeding one [`SourceSink`].
//!
//! ```text
//!  Source (list, then watch) ──► SourceSink: stamp Origin ──► ConfigStore ──handler──►
//!      commit: KV writes (keys owned by this cluster and source) ──► push requests
//!  Source reports synced (Istio's HasSynced) ──► SourceSink::synced: reconcile this
//!      source's KV keys, one full push, ready
//! ```
//!
//! A source owns its KV keys (`<cluster>.<source>.…`): its reconcile deletes only keys it
//! owns, never another source's or another cluster's.

use crate::metrics::{KindLabel, Metrics};
use crate::registry::{Rejection, Rejections, Warning, Warnings};
use crate::retry::{RetryConfig, retry};
use crate::sync::{self, Change, Changed, EventBuffer, SyncError, WriterHandle};
use shoal_infra::admin::Readiness;
use shoal_proto::change::TriggerReason;
use shoal_proto::config::{Config, ConfigKey, Kind, Origin};
use shoal_proto::push::PushRequest;
use shoal_proto::store::ConfigStore;
use shoal_proto::transport::ConfigKv;
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::mpsc;

/// The label Istio reads a workload's network from.
pub const NETWORK_LABEL: &str = "topology.istio.io/network";

/// A registry the ingest follows. It loads its objects into the sink, reports them
/// synced once the initial list is complete, then follows changes until `shutdown`.
/// Bad objects are reported as rejections and never stop it.
pub trait Source: Send + 'static {
    /// Names the source in its objects' origin and KV keys (`dir`, `kubernetes`).
    const NAME: &'static str;

    /// The error that stops the source (the ingest then exits and is restarted).
    type Error: std::error::Error + From<SyncError> + Send + Sync + 'static;

    fn run(
        self,
        sink: SourceSink,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// Where a sink's changes go.
pub(crate) struct Outputs {
    pub writer: WriterHandle,
    pub pushes: mpsc::Sender<PushRequest>,
    pub kv: Arc<dyn ConfigKv>,
    pub metrics: Metrics,
    pub rejections: Rejections,
    pub warnings: Warnings,
    pub ready: Readiness,
    pub retry: RetryConfig,
}

/// A source's view of the mesh config: its objects (stamped with its [`Origin`]) in a
/// [`ConfigStore`], mirrored into the config KV under keys it owns.
pub struct SourceSink {
    origin: Origin,
    out: Outputs,
    store: ConfigStore,
    events: EventBuffer,
    /// Keys this source has in the KV that the store lacks, kept at start-up because the
    /// source said they may still be defined (an object it could not read). Deleted once
    /// that is no longer so.
    kv_only: BTreeSet<ConfigKey>,
}

impl SourceSink {
    pub(crate) fn new(origin: Origin, out: Outputs) -> Self {
        let events = EventBuffer::default();
        let mut store = ConfigStore::new();
        store.register_event_handler(None, events.handler(out.metrics.clone()));
        Self {
            origin,
            out,
            store,
            events,
            kv_only: BTreeSet::new(),
        }
    }

    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Stamps this source's origin on `config`, and its network as the
    /// `topology.istio.io/network` label of workloads that do not name one.
    pub fn stamp(&self, config: &mut Config) {
        config.meta.origin.clone_from(&self.origin);
        if !self.origin.network.is_empty()
            && matches!(config.kind(), Kind::Pod | Kind::WorkloadEntry)
        {
            config
                .meta
                .labels
                .entry(NETWORK_LABEL.to_string())
                .or_insert_with(|| self.origin.network.clone());
        }
    }

    pub fn get(&self, key: &ConfigKey) -> Option<&Config> {
        self.store.get(key.kind, &key.namespace, &key.name)
    }

    /// Objects held.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    pub fn is_empty(&self) -> bool {
        self.store.len() == 0
    }

    /// Adds or replaces an object (stamped with [`SourceSink::stamp`] first). Written by
    /// the next [`SourceSink::commit`].
    pub fn apply(&mut self, config: Config) {
        self.store.apply(config);
    }

    /// Removes an object if held. Written by the next [`SourceSink::commit`].
    pub fn delete(&mut self, key: &ConfigKey) {
        if self.get(key).is_some() {
            let _ = self.store.delete(key.kind, &key.namespace, &key.name);
        }
    }

    /// Counts a rejection as it happens (`shoal_ingest_config_rejected_total`).
    pub fn count_rejection(&self, rejection: &Rejection) {
        tracing::warn!("{rejection}");
        self.out
            .metrics
            .rejected
            .get_or_create(&KindLabel {
                kind: rejection.kind,
            })
            .inc();
    }

    /// The rejections in force now (`/debug/rejections`, `shoal_ingest_config_rejected`).
    pub fn set_rejections(&self, rejections: Vec<Rejection>) {
        self.out
            .metrics
            .rejected_current
            .set(i64::try_from(rejections.len()).unwrap_or(i64::MAX));
        self.out.rejections.set(rejections);
    }

    /// The accepted objects' warnings in force now (`/debug/warnings`,
    /// `shoal_ingest_config_warnings{kind}`).
    pub fn set_warnings(&self, warnings: Vec<Warning>) {
        // `other`: documents of kinds Shoal does not read.
        for kind in Kind::ALL.iter().map(|k| k.as_str()).chain(["other"]) {
            let count = warnings.iter().filter(|w| w.kind == kind).count();
            self.out
                .metrics
                .warnings_current
                .get_or_create(&KindLabel { kind })
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        self.out.warnings.set(warnings);
    }

    /// Writes every change since the last commit to the KV, with a push each when
    /// `publish` (off during the initial load, which ends in one full push); then deletes
    /// the keys kept at start-up that are no longer `protected`. `seen` is when the source
    /// last saw a change of them (a file event), if earlier than now: the changes are
    /// dated then, so that the push debounce's quiet period counts from it.
    pub async fn commit(
        &mut self,
        publish: bool,
        seen: Option<SystemTime>,
        protected: impl Fn(&ConfigKey) -> bool,
    ) -> Result<(), SyncError> {
        for Changed { key, at } in self.events.drain() {
            let at = seen.map_or(at, |seen| seen.min(at));
            // The object as the store holds it now (none: deleted). A key changed twice
            // in one batch is written twice, both times as it is now: the same end state.
            let config = self.get(&key).cloned().map(Box::new);
            let change = Change { key, config, at };
            self.out.writer.send(change, publish).await?;
        }
        self.release_kv_only(protected).await
    }

    /// The initial list is complete (Istio's HasSynced): marks the store synced, deletes
    /// this source's KV keys it does not hold (except `protected` ones: objects it could
    /// not read), sends one full push at the KV's latest revision, and sets the ingest
    /// ready.
    pub async fn synced(
        &mut self,
        protected: impl Fn(&ConfigKey) -> bool,
    ) -> Result<(), SyncError> {
        // The KV as it is before the load is written: the load only writes keys the
        // store holds, which the plan keeps, so the keys to delete are the same, and a
        // first load does not read back every object it has just written.
        let kv = self.out.kv.clone();
        let entries = retry("kv_entries", self.out.retry, &self.out.metrics, || {
            kv.entries()
        })
        .await
        .map_err(SyncError::Kv)?;
        self.commit(false, None, |_| true).await?;
        self.store.mark_synced();
        let written = self.out.writer.flush().await?;
        let store = &self.store;
        let plan = sync::plan(
            &entries,
            &self.origin,
            |k| store.get(k.kind, &k.namespace, &k.name).is_some(),
            protected,
        );
        let now = SystemTime::now();
        for key in plan.delete {
            tracing::info!(%key, source = %self.origin.source, "deleting config the source no longer holds");
            self.delete_from_kv(key, now, false).await?;
        }
        for kv_key in plan.delete_legacy {
            tracing::info!(key = %kv_key, "deleting a config KV key of the format before sources");
            retry("kv_delete", self.out.retry, &self.out.metrics, || {
                kv.delete(&kv_key)
            })
            .await
            .map_err(SyncError::Kv)?;
        }
        self.kv_only.extend(plan.keep);
        let latest = plan.latest.max(written).max(self.out.writer.flush().await?);
        let push = PushRequest::full_everything(TriggerReason::GlobalUpdate, latest, now);
        self.out
            .pushes
            .send(push)
            .await
            .map_err(|_| SyncError::DebouncerGone)?;
        self.out.ready.set_ready(true);
        Ok(())
    }

    /// Deletes the KV keys kept at start-up that the store does not hold and that are no
    /// longer `protected`.
    async fn release_kv_only(
        &mut self,
        protected: impl Fn(&ConfigKey) -> bool,
    ) -> Result<(), SyncError> {
        let store = &self.store;
        self.kv_only
            .retain(|k| store.get(k.kind, &k.namespace, &k.name).is_none());
        let released: Vec<ConfigKey> = self
            .kv_only
            .iter()
            .filter(|k| !protected(k))
            .cloned()
            .collect();
        let now = SystemTime::now();
        for key in released {
            self.kv_only.remove(&key);
            tracing::info!(%key, source = %self.origin.source, "deleting config the source no longer defines");
            self.delete_from_kv(key, now, true).await?;
        }
        Ok(())
    }

    /// Queues the KV delete of a key the store does not hold (with a push if `publish`).
    async fn delete_from_kv(
        &self,
        key: ConfigKey,
        at: SystemTime,
        publish: bool,
    ) -> Result<(), SyncError> {
        let change = Change {
            key,
            config: None,
            at,
        };
        self.out.writer.send(change, publish).await
    }
}
