//! The task that writes changes to the config KV, in order, and hands each written
//! change to the debouncer with the revision the KV gave it.

use super::{Change, SyncError};
use crate::metrics::{Metrics, OpLabel};
use crate::retry::{RetryConfig, retry};
use bytes::Bytes;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesOrdered;
use shoal_infra::telemetry::{self, TRACE_TARGET};
use shoal_proto::config::ConfigKey;
use shoal_proto::config::Origin;
use shoal_proto::push::PushRequest;
use shoal_proto::transport::{ConfigKv, TransportError, config_kv_key, encode_config};
use std::collections::HashSet;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tracing::{Instrument, info_span};

pub(crate) enum WriterMsg {
    /// Mirror a change; with `publish`, send its push request once written.
    Change { change: Change, publish: bool },
    /// Reply with the highest revision written so far, once every earlier message is done.
    Flush(oneshot::Sender<u64>),
}

/// The registry's end of the writer's channel.
#[derive(Clone)]
pub(crate) struct WriterHandle {
    tx: mpsc::Sender<WriterMsg>,
}

impl WriterHandle {
    pub fn new(tx: mpsc::Sender<WriterMsg>) -> Self {
        Self { tx }
    }

    /// Queues a change, waiting for room (never drops it).
    pub async fn send(&self, change: Change, publish: bool) -> Result<(), SyncError> {
        self.tx
            .send(WriterMsg::Change { change, publish })
            .await
            .map_err(|_| SyncError::WriterGone)
    }

    /// Waits until every change queued so far is written; returns the highest revision.
    pub async fn flush(&self) -> Result<u64, SyncError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(WriterMsg::Flush(tx))
            .await
            .map_err(|_| SyncError::WriterGone)?;
        rx.await.map_err(|_| SyncError::WriterGone)
    }
}

pub(crate) struct KvWriter {
    pub kv: Arc<dyn ConfigKv>,
    /// The cluster and source whose keys this writer writes.
    pub origin: Origin,
    pub pushes: mpsc::Sender<PushRequest>,
    pub metrics: Metrics,
    pub retry: RetryConfig,
    /// Writes in flight at once while no push waits on them (at least 1).
    pub pipeline: usize,
}

/// The writes in flight: each resolves to its revision (`None`: nothing written).
type InFlight<'a> = FuturesOrdered<BoxFuture<'a, Result<Option<u64>, SyncError>>>;

impl KvWriter {
    /// Runs until the registry drops its handle (then every queued change is written
    /// first) or the KV fails for good.
    ///
    /// Writes without a push (the initial load, a reconcile) are pipelined, up to
    /// `pipeline` at once, since nothing is published until the flush that follows them;
    /// each one-round-trip-at-a-time would bound a large cluster's load by the KV's
    /// latency. A write with a push, a second write of a key in flight, and a flush wait
    /// for every earlier write first, so pushes follow their writes and a key's writes
    /// land in order.
    pub async fn run(self, mut rx: mpsc::Receiver<WriterMsg>) -> Result<(), SyncError> {
        let pipeline = self.pipeline.max(1);
        let mut latest = 0u64;
        let mut in_flight: InFlight<'_> = FuturesOrdered::new();
        let mut keys_in_flight: HashSet<ConfigKey> = HashSet::new();
        loop {
            let msg = if in_flight.is_empty() {
                rx.recv().await
            } else if in_flight.len() >= pipeline {
                latest = latest.max(next_revision(&mut in_flight).await?);
                continue;
            } else {
                tokio::select! {
                    biased;
                    msg = rx.recv() => msg,
                    Some(done) = in_flight.next() => {
                        latest = latest.max(done?.unwrap_or(0));
                        continue;
                    }
                }
            };
            let Some(msg) = msg else {
                break;
            };
            match msg {
                WriterMsg::Flush(reply) => {
                    latest = latest.max(drain(&mut in_flight, &mut keys_in_flight).await?);
                    let _ = reply.send(latest);
                }
                WriterMsg::Change {
                    change,
                    publish: false,
                } if !keys_in_flight.contains(&change.key) => {
                    if in_flight.is_empty() {
                        keys_in_flight.clear();
                    }
                    keys_in_flight.insert(change.key.clone());
                    let this = &self;
                    in_flight.push_back(Box::pin(async move { this.write(&change).await }));
                }
                WriterMsg::Change { change, publish } => {
                    latest = latest.max(drain(&mut in_flight, &mut keys_in_flight).await?);
                    // Where a change's trace starts: the registry event, its KV write,
                    // and (in the publisher) the debounced push that carries it on.
                    let (span, write_span) = match publish {
                        true => {
                            let span = info_span!(
                                target: TRACE_TARGET,
                                "config change",
                                key = %change.key,
                                deleted = change.config.is_none(),
                                revision = tracing::field::Empty,
                            );
                            let write = info_span!(target: TRACE_TARGET, parent: &span, "kv write");
                            (span, write)
                        }
                        false => (tracing::Span::none(), tracing::Span::none()),
                    };
                    let written = self.write(&change).instrument(write_span).await?;
                    let Some(revision) = written else {
                        continue;
                    };
                    latest = latest.max(revision);
                    if publish {
                        span.record("revision", revision);
                        let mut req = PushRequest::for_change(change.key, revision, change.at);
                        req.changes.trace = telemetry::inject(&span);
                        self.pushes
                            .send(req)
                            .await
                            .map_err(|_| SyncError::DebouncerGone)?;
                    }
                }
            }
        }
        latest = latest.max(drain(&mut in_flight, &mut keys_in_flight).await?);
        tracing::debug!(latest, "KV writer done");
        Ok(())
    }

    /// Writes one change; `None` when it cannot be encoded (logged; nothing to write).
    async fn write(&self, change: &Change) -> Result<Option<u64>, SyncError> {
        let kv_key = config_kv_key(&self.origin, &change.key);
        let (op, result) = match &change.config {
            Some(config) => {
                let value = match encode_config(config) {
                    Ok(v) => Bytes::from(v),
                    Err(e) => {
                        tracing::error!(key = %change.key, "cannot encode config: {e}");
                        return Ok(None);
                    }
                };
                let r = retry("kv_put", self.retry, &self.metrics, || {
                    self.kv.put(&kv_key, value.clone())
                })
                .await;
                ("put", r)
            }
            None => {
                let r = retry("kv_delete", self.retry, &self.metrics, || {
                    self.kv.delete(&kv_key)
                })
                .await;
                ("delete", r)
            }
        };
        match result {
            Ok(revision) => {
                self.metrics.kv_writes.get_or_create(&OpLabel { op }).inc();
                tracing::debug!(key = %kv_key, op, revision, "config KV written");
                Ok(Some(revision))
            }
            Err(TransportError::Codec(e)) => {
                tracing::error!(key = %kv_key, op, "config KV rejected the value: {e}");
                Ok(None)
            }
            Err(e) => Err(SyncError::Kv(e)),
        }
    }
}

/// The revision of the oldest write in flight (0 when it wrote nothing).
async fn next_revision(in_flight: &mut InFlight<'_>) -> Result<u64, SyncError> {
    match in_flight.next().await {
        Some(done) => Ok(done?.unwrap_or(0)),
        None => Ok(0),
    }
}

/// Waits for every write in flight; the highest revision they wrote.
async fn drain(
    in_flight: &mut InFlight<'_>,
    keys: &mut HashSet<ConfigKey>,
) -> Result<u64, SyncError> {
    let mut latest = 0;
    while let Some(done) = in_flight.next().await {
        latest = latest.max(done?.unwrap_or(0));
    }
    keys.clear();
    Ok(latest)
}
