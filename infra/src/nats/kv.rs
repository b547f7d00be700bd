//! `NatsConfigKv`: the config store on the JetStream KV bucket `shoal_config`. A write's
//! revision is the stream sequence, so it totally orders changes from every cluster.

use super::{NatsError, Result, bucket};
use async_nats::jetstream::{self, kv};
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use shoal_proto::transport::{self, CONFIG_BUCKET, ConfigKv, KvEntry, TransportError};
use std::time::Duration;

/// Bucket settings, used when the bucket is created.
#[derive(Clone, Debug)]
pub struct NatsConfigKvConfig {
    pub bucket: String,
    /// Values kept per key; 1 is enough (watchers want the latest).
    pub history: i64,
    /// Largest config object accepted, in bytes.
    pub max_value_size: i32,
    /// Bound of the whole bucket, in bytes; writes beyond it fail.
    pub max_bytes: i64,
    pub storage: jetstream::stream::StorageType,
    /// Bound of one `entries()` read.
    pub read_timeout: Duration,
}

impl Default for NatsConfigKvConfig {
    fn default() -> Self {
        Self {
            bucket: CONFIG_BUCKET.into(),
            history: 1,
            max_value_size: 1024 * 1024,
            max_bytes: 1024 * 1024 * 1024,
            storage: jetstream::stream::StorageType::File,
            read_timeout: Duration::from_secs(30),
        }
    }
}

pub struct NatsConfigKv {
    js: jetstream::Context,
    store: kv::Store,
    read_timeout: Duration,
}

impl NatsConfigKv {
    /// Opens the bucket, creating it if missing.
    pub async fn open(client: async_nats::Client, config: NatsConfigKvConfig) -> Result<Self> {
        let js = jetstream::new(client);
        let store = bucket::open(
            &js,
            kv::Config {
                bucket: config.bucket.clone(),
                description: "Shoal config objects: <cluster>.<kind>.<namespace>.<name>".into(),
                history: config.history,
                max_value_size: config.max_value_size,
                max_bytes: config.max_bytes,
                storage: config.storage,
                ..Default::default()
            },
        )
        .await?;
        Ok(Self {
            js,
            store,
            read_timeout: config.read_timeout,
        })
    }
}

#[async_trait]
impl ConfigKv for NatsConfigKv {
    async fn put(&self, key: &str, value: Bytes) -> transport::Result<u64> {
        bucket::check_key(key)?;
        self.store
            .put(key, value)
            .await
            .map_err(|e| NatsError::publish(&bucket::subject(&self.store, key), e).into())
    }

    /// Publishes the delete marker itself: the client's `delete` does not return the
    /// revision, which callers need.
    async fn delete(&self, key: &str) -> transport::Result<u64> {
        bucket::check_key(key)?;
        let subject = bucket::subject(&self.store, key);
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("KV-Operation", "DEL");
        let ack = self
            .js
            .publish_with_headers(subject.clone(), headers, Bytes::new())
            .await
            .map_err(|e| NatsError::publish(&subject, e))?
            .await
            .map_err(|e| NatsError::publish(&subject, e))?;
        Ok(ack.sequence)
    }

    async fn entries(&self) -> transport::Result<Vec<KvEntry>> {
        let mut entries = bucket::latest_entries(&self.store, self.read_timeout).await?;
        entries.retain(|e| e.value.is_some());
        Ok(entries)
    }

    async fn watch(&self) -> transport::Result<BoxStream<'static, transport::Result<KvEntry>>> {
        let watch = self
            .store
            .watch_with_history(">")
            .await
            .map_err(|e| NatsError::subscribe(&self.store.prefix, e))?;
        let bucket = self.store.name.clone();
        Ok(watch
            .map(move |item| match item {
                Ok(entry) => Ok(KvEntry {
                    value: matches!(entry.operation, kv::Operation::Put).then_some(entry.value),
                    key: entry.key,
                    revision: entry.revision,
                }),
                Err(e) => Err(TransportError::from(NatsError::subscribe(&bucket, e))),
            })
            .boxed())
    }
}
