//! `NatsMembership`: one heartbeat key per edge in the KV bucket `shoal_edges`, whose
//! `max_age` is the TTL: a member that stops beating drops out when its last write ages
//! out of the stream.

use super::{NatsError, Result, bucket};
use async_nats::jetstream::{self, kv};
use async_trait::async_trait;
use shoal_proto::transport::{self, EDGES_BUCKET, Member, Membership};
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct NatsMembershipConfig {
    pub bucket: String,
    /// How long a heartbeat keeps a member live; beat well within it (e.g. every third).
    pub max_age: Duration,
    /// Memory: heartbeats need no disk, and a restarted server re-learns them in one beat.
    pub storage: jetstream::stream::StorageType,
    /// Bound of one `members()` read.
    pub read_timeout: Duration,
}

impl Default for NatsMembershipConfig {
    fn default() -> Self {
        Self {
            bucket: EDGES_BUCKET.into(),
            max_age: Duration::from_secs(15),
            storage: jetstream::stream::StorageType::Memory,
            read_timeout: Duration::from_secs(10),
        }
    }
}

pub struct NatsMembership {
    js: jetstream::Context,
    bucket: kv::Config,
    /// Replaced when the bucket is re-created (a restarted server lost it: it lives in
    /// memory).
    store: std::sync::Mutex<kv::Store>,
    read_timeout: Duration,
}

impl NatsMembership {
    /// Opens the bucket, creating it if missing. An existing bucket keeps its TTL.
    pub async fn open(client: async_nats::Client, config: NatsMembershipConfig) -> Result<Self> {
        let js = jetstream::new(client);
        let bucket = kv::Config {
            bucket: config.bucket.clone(),
            description: "Shoal edge heartbeats".into(),
            history: 1,
            max_age: config.max_age,
            max_value_size: 64 * 1024,
            max_bytes: 64 * 1024 * 1024,
            storage: config.storage,
            ..Default::default()
        };
        let store = bucket::open(&js, bucket.clone()).await?;
        Ok(Self {
            js,
            bucket,
            store: std::sync::Mutex::new(store),
            read_timeout: config.read_timeout,
        })
    }

    fn store(&self) -> kv::Store {
        self.store
            .lock()
            .expect("membership store poisoned")
            .clone()
    }

    async fn put(&self, store: &kv::Store, member: &Member) -> transport::Result<()> {
        let value = serde_json::to_vec(member).map_err(|e| NatsError::Codec(e.to_string()))?;
        let key = member_key(&member.id);
        store
            .put(&key, value.into())
            .await
            .map_err(|e| NatsError::publish(&bucket::subject(store, &key), e))?;
        Ok(())
    }
}

/// Member ids are pod names or similar; anything outside `[-/a-zA-Z0-9]` is escaped as
/// `_XX` so every id is a valid key and distinct ids stay distinct.
fn member_key(id: &str) -> String {
    let mut key = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'/' {
            key.push(b as char);
        } else {
            key.push_str(&format!("_{b:02X}"));
        }
    }
    if key.is_empty() {
        key.push_str("_00");
    }
    key
}

#[async_trait]
impl Membership for NatsMembership {
    /// A failed beat re-opens the bucket and beats once more: a NATS server restarted
    /// without it (it lives in memory) would otherwise freeze every edge's ring, keeping
    /// dead edges in it and new ones out.
    async fn heartbeat(&self, member: &Member) -> transport::Result<()> {
        let store = self.store();
        let Err(error) = self.put(&store, member).await else {
            return Ok(());
        };
        let Ok(reopened) = bucket::open(&self.js, self.bucket.clone()).await else {
            return Err(error);
        };
        tracing::info!(bucket = %self.bucket.bucket, %error, "membership bucket re-opened after a failed heartbeat");
        *self.store.lock().expect("membership store poisoned") = reopened.clone();
        self.put(&reopened, member).await
    }

    async fn leave(&self, id: &str) -> transport::Result<()> {
        let (store, key) = (self.store(), member_key(id));
        store
            .delete(&key)
            .await
            .map_err(|e| NatsError::publish(&bucket::subject(&store, &key), e))?;
        Ok(())
    }

    async fn members(&self) -> transport::Result<Vec<Member>> {
        let entries = bucket::latest_entries(&self.store(), self.read_timeout).await?;
        let mut members = Vec::with_capacity(entries.len());
        for value in entries.into_iter().filter_map(|e| e.value) {
            match serde_json::from_slice::<Member>(&value) {
                Ok(member) => members.push(member),
                // One bad heartbeat must not hide every other edge.
                Err(error) => tracing::warn!(%error, "skipping undecodable membership entry"),
            }
        }
        members.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(members)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_keys_are_valid_and_distinct() {
        for id in ["edge-0", "edge.0", "edge_0", "", "ünï"] {
            assert!(bucket::check_key(&member_key(id)).is_ok(), "{id:?}");
        }
        assert_ne!(member_key("edge.0"), member_key("edge_0"));
    }
}
