//! `MemoryConfigKv`: a map with a monotonic revision and a broadcast of changes. A
//! watcher that lags re-reads the changed keys from the map, so no change is lost (only
//! superseded values of one key are collapsed, as in a history-1 JetStream KV).

use super::lock;
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use shoal_proto::transport::{ConfigKv, KvEntry, Result};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// Bounds of the in-process config store.
#[derive(Clone, Debug)]
pub struct MemoryConfigKvConfig {
    /// Changes buffered per watcher before it lags and resyncs from the map.
    pub watch_capacity: usize,
}

impl Default for MemoryConfigKvConfig {
    fn default() -> Self {
        Self {
            watch_capacity: 1024,
        }
    }
}

#[derive(Default)]
struct State {
    revision: u64,
    /// Latest entry per key; deletes stay as tombstones (`value: None`) for watch replay.
    entries: BTreeMap<String, KvEntry>,
}

impl State {
    /// Entries newer than `after`, in revision order.
    fn since(&self, after: u64) -> VecDeque<KvEntry> {
        let mut out: Vec<_> = self
            .entries
            .values()
            .filter(|e| e.revision > after)
            .cloned()
            .collect();
        out.sort_by_key(|e| e.revision);
        out.into()
    }
}

pub struct MemoryConfigKv {
    state: Arc<Mutex<State>>,
    changes: broadcast::Sender<KvEntry>,
}

impl Default for MemoryConfigKv {
    fn default() -> Self {
        Self::new(MemoryConfigKvConfig::default())
    }
}

impl MemoryConfigKv {
    pub fn new(config: MemoryConfigKvConfig) -> Self {
        Self {
            state: Arc::default(),
            changes: broadcast::channel(config.watch_capacity.max(1)).0,
        }
    }

    fn write(&self, key: &str, value: Option<Bytes>) -> u64 {
        let mut state = lock(&self.state);
        state.revision += 1;
        let entry = KvEntry {
            key: key.to_owned(),
            value,
            revision: state.revision,
        };
        state.entries.insert(key.to_owned(), entry.clone());
        // Sent under the lock so watchers see changes in revision order. Err = no watcher.
        let _ = self.changes.send(entry);
        state.revision
    }
}

/// One watcher: replayed/resynced entries first, then the live broadcast.
struct Watcher {
    state: Arc<Mutex<State>>,
    pending: VecDeque<KvEntry>,
    rx: broadcast::Receiver<KvEntry>,
    last: u64,
}

impl Watcher {
    async fn next(mut self) -> Option<(Result<KvEntry>, Self)> {
        loop {
            if let Some(entry) = self.pending.pop_front() {
                self.last = entry.revision;
                return Some((Ok(entry), self));
            }
            match self.rx.recv().await {
                Ok(entry) if entry.revision > self.last => self.pending.push_back(entry),
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::debug!(missed, "config watch lagged; resyncing from state");
                    let state = lock(&self.state);
                    self.pending = state.since(self.last);
                    // Resubscribed under the lock: later writes reach the new receiver.
                    self.rx = self.rx.resubscribe();
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

#[async_trait]
impl ConfigKv for MemoryConfigKv {
    async fn put(&self, key: &str, value: Bytes) -> Result<u64> {
        Ok(self.write(key, Some(value)))
    }

    async fn delete(&self, key: &str) -> Result<u64> {
        Ok(self.write(key, None))
    }

    /// In revision order, as the NATS bucket reads them.
    async fn entries(&self) -> Result<Vec<KvEntry>> {
        let mut entries = lock(&self.state).since(0);
        entries.retain(|e| e.value.is_some());
        Ok(entries.into())
    }

    async fn watch(&self) -> Result<BoxStream<'static, Result<KvEntry>>> {
        let watcher = {
            let state = lock(&self.state);
            Watcher {
                state: self.state.clone(),
                pending: state.since(0),
                rx: self.changes.subscribe(),
                last: 0,
            }
        };
        Ok(stream::unfold(watcher, Watcher::next).boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lagging_watcher_resyncs_without_losing_keys() {
        let kv = MemoryConfigKv::new(MemoryConfigKvConfig { watch_capacity: 2 });
        let mut watch = kv.watch().await.unwrap();
        for i in 0..10 {
            kv.put(&format!("k{i}"), Bytes::from("v")).await.unwrap();
        }
        kv.delete("k3").await.unwrap();
        let mut seen = BTreeMap::new();
        let mut last = 0;
        while seen.len() < 10 || seen.get("k3") != Some(&None) {
            let e = watch.next().await.unwrap().unwrap();
            assert!(e.revision > last, "revisions must increase");
            last = e.revision;
            seen.insert(e.key, e.value);
        }
        assert_eq!(last, 11);
    }
}
