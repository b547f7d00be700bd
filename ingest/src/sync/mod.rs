//! KV sync: ConfigStore events → config KV writes → push requests.
//!
//! ```text
//!  ConfigStore ──handler──► EventBuffer ──(registry, after each batch)──► bounded mpsc
//!       ──► KvWriter: put/delete `<cluster>.<source>.<kind>.<ns>.<name>` (retried while unavailable)
//!       ──► PushRequest::for_change(key, revision) ──► debouncer
//! ```
//!
//! Store handlers are synchronous, so the handler only records the change; the registry
//! forwards the batch over a bounded channel (awaiting room, so nothing is dropped) to one
//! writer task. The writer handles changes in order and sends each push only after its KV
//! write returned a revision, so a builder woken by the push always finds the change.

mod reconcile;
mod writer;

pub(crate) use reconcile::plan;
pub(crate) use writer::{KvWriter, WriterHandle};

use crate::metrics::{EventLabels, Metrics};
use shoal_proto::config::{Config, ConfigKey};
use shoal_proto::store::{EventKind, Handler};
use shoal_proto::transport::TransportError;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// Errors of the sync path.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The KV failed with an error retrying cannot fix.
    #[error("config KV: {0}")]
    Kv(#[source] TransportError),
    /// The writer task is gone (it failed, or shutdown began).
    #[error("KV writer stopped")]
    WriterGone,
    /// The debouncer is gone.
    #[error("debouncer stopped")]
    DebouncerGone,
}

/// One object change to mirror into the KV: `config == None` is a delete.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Change {
    pub key: ConfigKey,
    pub config: Option<Box<Config>>,
    /// When the store saw the change: the push's start time.
    pub at: SystemTime,
}

/// One store event, by key: what it wrote is read from the store when the batch is
/// sent, so a batch holds no copy of the objects (a large cluster's initial load is one
/// batch of every object).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Changed {
    pub key: ConfigKey,
    /// When the store saw the change: the push's start time.
    pub at: SystemTime,
}

/// The changes the store's handler recorded since the last drain.
#[derive(Clone, Default)]
pub(crate) struct EventBuffer(Arc<Mutex<Vec<Changed>>>);

impl EventBuffer {
    /// The handler to register on the ConfigStore (all kinds).
    pub fn handler(&self, metrics: Metrics) -> Handler {
        let buffer = self.0.clone();
        Box::new(move |event| {
            let key = event.key();
            let name = match event.kind {
                EventKind::Add => "add",
                EventKind::Update => "update",
                EventKind::Delete => "delete",
            };
            metrics
                .config_events
                .get_or_create(&EventLabels {
                    kind: key.kind.as_str(),
                    event: name,
                })
                .inc();
            tracing::debug!(%key, event = name, "config event");
            let changed = Changed {
                key,
                at: SystemTime::now(),
            };
            buffer.lock().expect("event buffer poisoned").push(changed);
        })
    }

    pub fn drain(&self) -> Vec<Changed> {
        std::mem::take(&mut *self.0.lock().expect("event buffer poisoned"))
    }
}

#[cfg(test)]
mod tests;
