//! Key-value bucket plumbing shared by the config store and membership: opening (or
//! creating) a bucket, reading the latest entry of every key, and key checks.

use super::{NatsError, Result, no_room};
use async_nats::jetstream;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, ReplayPolicy, pull};
use async_nats::jetstream::kv::{self, Store};
use async_nats::jetstream::stream::{self, DiscardPolicy};
use futures::StreamExt;
use shoal_proto::transport::KvEntry;
use std::time::Duration;

const KV_OPERATION: &str = "KV-Operation";

/// Opens `config.bucket`, creating it if missing. Servers before 2.10 reject some fields
/// the client sends on creation, so as a last resort the backing stream `KV_<bucket>` is
/// created with only the fields every 2.x server knows.
pub(super) async fn open(js: &jetstream::Context, config: kv::Config) -> Result<Store> {
    if let Ok(store) = js.get_key_value(&config.bucket).await {
        let existing = &store.stream.cached_info().config;
        if existing.max_age != config.max_age
            || existing.max_messages_per_subject != config.history
            || existing.max_bytes != config.max_bytes
        {
            tracing::warn!(
                bucket = %config.bucket,
                max_age = ?existing.max_age,
                history = existing.max_messages_per_subject,
                max_bytes = existing.max_bytes,
                "existing bucket has other settings than configured; keeping them"
            );
        }
        return Ok(store);
    }
    let create_error = match js.create_key_value(config.clone()).await {
        Ok(store) => return Ok(store),
        Err(error) => error,
    };
    tracing::info!(bucket = %config.bucket, error = %create_error, "creating bucket stream directly");
    let bucket_error = |message: String| NatsError::Bucket {
        bucket: config.bucket.clone(),
        message,
    };
    js.create_stream(compatible_stream_config(&config))
        .await
        .map_err(|e| {
            // Without room, the client's own attempt failed for the same reason: said once.
            bucket_error(
                no_room(&e, config.storage, config.max_bytes)
                    .unwrap_or_else(|| format!("create: {create_error}; create stream: {e}")),
            )
        })?;
    js.get_key_value(&config.bucket)
        .await
        .map_err(|e| bucket_error(e.to_string()))
}

/// The stream a KV bucket is, in the fields nats-server 2.9 understands.
pub(super) fn compatible_stream_config(config: &kv::Config) -> stream::Config {
    stream::Config {
        name: format!("KV_{}", config.bucket),
        subjects: vec![format!("$KV.{}.>", config.bucket)],
        max_messages_per_subject: config.history.max(1),
        max_bytes: config.max_bytes,
        max_age: config.max_age,
        max_message_size: config.max_value_size,
        storage: config.storage,
        num_replicas: config.num_replicas.max(1),
        discard: DiscardPolicy::New,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        ..Default::default()
    }
}

/// The subject a key is written on (`$KV.<bucket>.<key>`).
pub(super) fn subject(store: &Store, key: &str) -> String {
    format!(
        "{}{key}",
        store.put_prefix.as_deref().unwrap_or(&store.prefix)
    )
}

/// NATS key characters: `[-/_=.a-zA-Z0-9]`, not starting or ending with `.`.
pub(super) fn check_key(key: &str) -> Result<()> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '/' | '_' | '=' | '.');
    if key.is_empty() || key.starts_with('.') || key.ends_with('.') || !key.chars().all(ok_char) {
        return Err(NatsError::InvalidKey(key.to_owned()));
    }
    Ok(())
}

/// Maps a message of the bucket's stream to an entry (`value: None` for a delete/purge).
pub(super) fn entry(store: &Store, message: &async_nats::Message, revision: u64) -> KvEntry {
    let op = message
        .headers
        .as_ref()
        .and_then(|h| h.get(KV_OPERATION))
        .map(|v| v.as_str().to_owned());
    let deleted = matches!(op.as_deref(), Some("DEL" | "PURGE"));
    KvEntry {
        key: message
            .subject
            .strip_prefix(store.prefix.as_str())
            .unwrap_or(&message.subject)
            .to_owned(),
        value: (!deleted).then(|| message.payload.clone()),
        revision,
    }
}

/// Messages per no-wait fetch while reading a bucket.
const READ_BATCH: usize = 256;

/// The latest entry of every key, tombstones included, in revision order: an ephemeral
/// "last per subject" consumer read with no-wait fetches, so it is one request per batch
/// rather than one per key, and a read of entries expiring meanwhile still finishes (a
/// fetch answers "no messages" instead of waiting).
pub(super) async fn latest_entries(store: &Store, timeout: Duration) -> Result<Vec<KvEntry>> {
    let read_error =
        |e: &dyn std::fmt::Display| NatsError::jetstream(format!("read {}", store.name), e);
    let consumer = store
        .stream
        .create_consumer(pull::Config {
            filter_subject: format!("{}>", store.prefix),
            deliver_policy: DeliverPolicy::LastPerSubject,
            ack_policy: AckPolicy::None,
            replay_policy: ReplayPolicy::Instant,
            // Cleanup if this process dies before deleting it.
            inactive_threshold: Duration::from_secs(30),
            memory_storage: true,
            ..Default::default()
        })
        .await
        .map_err(|e| read_error(&e))?;
    let read = async {
        let mut out = Vec::new();
        loop {
            let mut batch = consumer
                .fetch()
                .max_messages(READ_BATCH)
                .messages()
                .await
                .map_err(|e| read_error(&e))?;
            let mut fetched = 0;
            let mut caught_up = false;
            while let Some(message) = batch.next().await {
                let message = message.map_err(|e| read_error(&e))?;
                let info = message.info().map_err(|e| read_error(&e))?;
                let (revision, pending) = (info.stream_sequence, info.pending);
                out.push(entry(store, &message, revision));
                fetched += 1;
                caught_up = pending == 0;
            }
            if fetched == 0 || caught_up {
                return Ok(out);
            }
        }
    };
    let result = tokio::time::timeout(timeout, read)
        .await
        .map_err(|_| NatsError::Timeout(format!("bucket {}", store.name)))
        .and_then(|r| r);
    let name = consumer.cached_info().name.clone();
    if let Err(error) = store.stream.delete_consumer(&name).await {
        tracing::debug!(%error, "cannot delete read consumer; it expires when inactive");
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pre-2.10 path: a bucket whose stream was created directly works as a KV bucket.
    #[cfg(feature = "test-util")]
    #[tokio::test]
    async fn directly_created_stream_is_a_working_bucket() {
        use crate::nats::{NatsConfigKv, NatsConfigKvConfig, connect};
        use shoal_proto::transport::ConfigKv;

        let server = crate::testing::NatsServer::start();
        let client = connect(&server.url()).await.unwrap();
        let js = jetstream::new(client.clone());
        let config = kv::Config {
            bucket: "compat".into(),
            history: 1,
            max_value_size: 1024,
            max_bytes: 1024 * 1024,
            ..Default::default()
        };
        js.create_stream(compatible_stream_config(&config))
            .await
            .unwrap();
        let kv = NatsConfigKv::open(
            client,
            NatsConfigKvConfig {
                bucket: "compat".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        let put = kv.put("a", "1".into()).await.unwrap();
        let del = kv.delete("a").await.unwrap();
        assert!(put < del);
        let mut watch = kv.watch().await.unwrap();
        let tombstone = watch.next().await.unwrap().unwrap();
        assert_eq!(
            (tombstone.key.as_str(), tombstone.value, tombstone.revision),
            ("a", None, del)
        );
    }

    #[test]
    fn keys_are_checked() {
        assert!(check_key("c.VirtualService.ns.a_2Eb").is_ok());
        assert!(check_key("edge-0").is_ok());
        for bad in ["", ".a", "a.", "a b", "a*", "a>"] {
            assert!(check_key(bad).is_err(), "{bad:?}");
        }
    }
}
