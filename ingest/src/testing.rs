//! Test doubles and helpers shared by the unit tests.

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use shoal_infra::memory::{MemoryBus, MemoryConfigKv};
use shoal_proto::push::PushRequest;
use shoal_proto::transport::{
    Bus, ConfigKv, Delivery, KvEntry, Result, SnapshotEvent, TransportError,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// Fails the next `failures` calls with `Unavailable`, then behaves as its inner twin.
#[derive(Default)]
pub(crate) struct Flaky<T> {
    pub inner: T,
    pub failures: AtomicU32,
}

impl<T> Flaky<T> {
    pub fn new(inner: T, failures: u32) -> Arc<Self> {
        Arc::new(Self {
            inner,
            failures: AtomicU32::new(failures),
        })
    }

    fn check(&self, what: &'static str) -> Result<()> {
        let left = self.failures.load(Ordering::SeqCst);
        if left > 0 {
            self.failures.store(left - 1, Ordering::SeqCst);
            return Err(TransportError::Unavailable(what, "injected".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl ConfigKv for Flaky<MemoryConfigKv> {
    async fn put(&self, key: &str, value: Bytes) -> Result<u64> {
        self.check("kv")?;
        self.inner.put(key, value).await
    }
    async fn delete(&self, key: &str) -> Result<u64> {
        self.check("kv")?;
        self.inner.delete(key).await
    }
    async fn entries(&self) -> Result<Vec<KvEntry>> {
        self.check("kv")?;
        self.inner.entries().await
    }
    async fn watch(&self) -> Result<BoxStream<'static, Result<KvEntry>>> {
        self.inner.watch().await
    }
}

#[async_trait]
impl Bus for Flaky<MemoryBus> {
    async fn publish_push(&self, request: &PushRequest) -> Result<()> {
        self.check("bus")?;
        self.inner.publish_push(request).await
    }
    async fn push_requests(&self) -> Result<BoxStream<'static, Result<Delivery<PushRequest>>>> {
        self.inner.push_requests().await
    }
    async fn publish_snapshot(&self, event: &SnapshotEvent) -> Result<()> {
        self.inner.publish_snapshot(event).await
    }
    async fn snapshot_events(&self) -> Result<BoxStream<'static, Result<SnapshotEvent>>> {
        self.inner.snapshot_events().await
    }
}

/// The live objects in `kv` whose keys `owner` (an origin's cluster and source) owns.
pub(crate) async fn owned_objects(
    kv: &dyn ConfigKv,
    owner: &shoal_proto::config::Origin,
) -> std::collections::BTreeMap<shoal_proto::config::ConfigKey, shoal_proto::config::Config> {
    kv.entries()
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| {
            let (key_owner, key) = shoal_proto::transport::parse_config_kv_key(&e.key)?;
            let value = e.value?;
            key_owner
                .is(owner)
                .then(|| (key, shoal_proto::transport::decode_config(&value).unwrap()))
        })
        .collect()
}

/// Labels from `(key, value)` pairs.
pub(crate) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
