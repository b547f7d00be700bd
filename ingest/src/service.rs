//! The ingest's tasks, wired together behind the transport traits.
//!
//! ```text
//!  registry (this task) ──WriterHandle──► kv_writer task ──mpsc──► debounce task ──► Bus
//! ```
//!
//! Shutdown runs front to back: the registry stops on drain and drops its sender, the
//! writer finishes every queued change and drops its own, the debouncer pushes what is
//! pending; `run` returns when all three are done. Any task ending early is fatal.

use crate::config::IngestConfig;
use crate::debounce::debounce;
use crate::metrics::Metrics;
use crate::publish::Publisher;
use crate::registry::{DirectoryRegistry, RegistryConfig, RegistryError, Rejections, Warnings};
use crate::source::{Outputs, Source, SourceSink};
use crate::sync::{KvWriter, SyncError, WriterHandle};
use prometheus_client::registry::Registry;
use shoal_infra::admin::Readiness;
use shoal_infra::runtime::DrainWatch;
use shoal_proto::config::Origin;
use shoal_proto::transport::{Bus, ConfigKv};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tracing::Instrument;

/// Why the ingest stopped.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Kubernetes(#[from] crate::kubernetes::KubeError),
    #[error(transparent)]
    Sync(#[from] SyncError),
    /// A task ended before shutdown, or panicked.
    #[error("{0} task ended unexpectedly")]
    TaskEnded(&'static str),
}

/// What the admin server shows of a running ingest. Cheap to clone.
#[derive(Clone, Debug)]
pub struct IngestHandle {
    readiness: Readiness,
    rejections: Rejections,
    warnings: Warnings,
}

impl IngestHandle {
    /// Ready once the directory is loaded, the KV reconciled and the first full push
    /// queued (for `/healthz/ready`).
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }

    pub fn is_ready(&self) -> bool {
        self.readiness.is_ready()
    }

    /// The objects rejected right now (for `/debug/rejections`).
    pub fn rejections(&self) -> &Rejections {
        &self.rejections
    }

    /// `/debug/rejections` as JSON: `[{file, line, kind, object, reason}]`.
    pub fn rejections_json(&self) -> serde_json::Value {
        self.rejections.to_json()
    }

    /// The accepted objects' warnings right now (for `/debug/warnings`).
    pub fn warnings(&self) -> &Warnings {
        &self.warnings
    }

    /// `/debug/warnings` as JSON: `[{file, line, kind, object, warning}]`.
    pub fn warnings_json(&self) -> serde_json::Value {
        self.warnings.to_json()
    }
}

/// An ingest, its metrics registered, ready to run.
pub struct Ingest {
    config: IngestConfig,
    kv: Arc<dyn ConfigKv>,
    bus: Arc<dyn Bus>,
    metrics: Metrics,
    handle: IngestHandle,
}

impl Ingest {
    /// Registers the ingest's metrics in `registry`; nothing runs until [`Ingest::run`].
    pub fn new(
        config: IngestConfig,
        kv: Arc<dyn ConfigKv>,
        bus: Arc<dyn Bus>,
        registry: &mut Registry,
    ) -> Self {
        Self {
            config,
            kv,
            bus,
            metrics: Metrics::new(registry),
            handle: IngestHandle {
                readiness: Readiness::new(),
                rejections: Rejections::default(),
                warnings: Warnings::default(),
            },
        }
    }

    /// An ingest that counts into `metrics`, already registered by another (a remote
    /// cluster's ingest, beside its primary's).
    pub(crate) fn with_metrics(
        config: IngestConfig,
        kv: Arc<dyn ConfigKv>,
        bus: Arc<dyn Bus>,
        metrics: Metrics,
    ) -> Self {
        Self {
            config,
            kv,
            bus,
            metrics,
            handle: IngestHandle {
                readiness: Readiness::new(),
                rejections: Rejections::default(),
                warnings: Warnings::default(),
            },
        }
    }

    /// The same ingest for a cluster on `network`.
    pub(crate) fn with_network(mut self, network: &str) -> Self {
        network.clone_into(&mut self.config.network);
        self
    }

    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Sets the readiness flag to report through (e.g. one shared with an admin server
    /// that already exists). By default the ingest has its own.
    pub fn with_readiness(mut self, readiness: Readiness) -> Self {
        self.handle.readiness = readiness;
        self
    }

    pub fn handle(&self) -> IngestHandle {
        self.handle.clone()
    }

    /// Loads the directory, reconciles the KV, publishes a full push, then follows the
    /// directory until `drain` starts; returns once every queued change is written and
    /// every pending push published.
    pub async fn run(self, drain: DrainWatch) -> Result<(), IngestError> {
        let registry = DirectoryRegistry::new(RegistryConfig {
            root: self.config.config_dir.clone(),
            coalesce: self.config.file_coalesce,
            coalesce_max: (self.config.file_coalesce * 20).max(Duration::from_secs(1)),
            resync: self.config.resync_interval,
            watch_queue: self.config.watch_queue,
            system_namespace: self.config.system_namespace.clone(),
        });
        let span = tracing::info_span!("registry", dir = %self.config.config_dir.display());
        self.run_source(registry, span, drain).await
    }

    /// As [`Ingest::run`], with `source` in place of the directory.
    pub async fn run_source<S>(
        self,
        source: S,
        span: tracing::Span,
        drain: DrainWatch,
    ) -> Result<(), IngestError>
    where
        S: Source,
        IngestError: From<S::Error>,
    {
        let Self {
            config,
            kv,
            bus,
            metrics,
            handle,
        } = self;
        let (change_tx, change_rx) = mpsc::channel(config.change_queue.max(1));
        let (push_tx, push_rx) = mpsc::channel(config.push_queue.max(1));

        let publisher = Arc::new(Publisher::new(bus, metrics.clone(), config.retry));
        let debouncer = debounce(push_rx, config.debounce(), move |req| {
            let publisher = publisher.clone();
            async move { publisher.publish(req).await }
        });
        let mut debouncer = tokio::spawn(debouncer.instrument(tracing::info_span!("debounce")));

        let origin = Origin::new(&config.cluster_id, S::NAME, &config.network);
        let writer = KvWriter {
            kv: kv.clone(),
            origin: origin.clone(),
            pushes: push_tx.clone(),
            metrics: metrics.clone(),
            retry: config.retry,
            pipeline: config.kv_pipeline,
        };
        let writer_span = tracing::info_span!("kv_writer", cluster = %config.cluster_id);
        let mut writer = tokio::spawn(writer.run(change_rx).instrument(writer_span));

        let sink = SourceSink::new(
            origin,
            Outputs {
                writer: WriterHandle::new(change_tx),
                pushes: push_tx,
                kv,
                metrics,
                rejections: handle.rejections.clone(),
                warnings: handle.warnings.clone(),
                ready: handle.readiness.clone(),
                retry: config.retry,
            },
        );
        let registry = Source::run(source, sink, drain.wait()).instrument(span);

        let result = tokio::select! {
            r = registry => r.map_err(IngestError::from),
            w = &mut writer => Err(match w {
                Ok(Err(e)) => e.into(),
                _ => IngestError::TaskEnded("kv_writer"),
            }),
            _ = &mut debouncer => Err(IngestError::TaskEnded("debounce")),
        };
        handle.readiness.set_ready(false);
        if let Err(e) = result {
            writer.abort();
            debouncer.abort();
            return Err(e);
        }
        // The registry dropped its senders: the writer drains, then the debouncer.
        match writer.await {
            Ok(r) => r?,
            Err(_) => return Err(IngestError::TaskEnded("kv_writer")),
        }
        debouncer
            .await
            .map_err(|_| IngestError::TaskEnded("debounce"))?;
        drop(drain);
        Ok(())
    }
}
