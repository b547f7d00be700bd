//! The task that writes changes to the config KV, in order, and hands each written
//! change to the debouncer with the revision the KV gave it.

use super::{Change, SyncError};
use crate::metrics::{Metrics, OpLabel};
use crate::retry::{RetryConfig, retry};
use bytes::Bytes;
use shoal_proto::config::Origin;
use shoal_proto::push::PushRequest;
use shoal_proto::transport::{ConfigKv, TransportError, config_kv_key, encode_config};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

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
}

impl KvWriter {
    /// Runs until the registry drops its handle (then every queued change is written
    /// first) or the KV fails for good.
    pub async fn run(self, mut rx: mpsc::Receiver<WriterMsg>) -> Result<(), SyncError> {
        let mut latest = 0u64;
        while let Some(msg) = rx.recv().await {
            match msg {
                WriterMsg::Flush(reply) => {
                    let _ = reply.send(latest);
                }
                WriterMsg::Change { change, publish } => {
                    let Some(revision) = self.write(&change).await? else {
                        continue;
                    };
                    latest = latest.max(revision);
                    if publish {
                        let req = PushRequest::for_change(change.key, revision, change.at);
                        self.pushes
                            .send(req)
                            .await
                            .map_err(|_| SyncError::DebouncerGone)?;
                    }
                }
            }
        }
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
