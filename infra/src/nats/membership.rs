//! `NatsMembership`: one heartbeat key per edge in the KV bucket `shoal_edges`, whose
//! `max_age` is the TTL: a member that stops beating drops out when its last write ages
//! out of the stream.

use super::{NatsError, Result, bucket};
use async_nats::jetstream::{self, kv};
use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use shoal_proto::transport::{self, EDGES_BUCKET, Member, MemberEvent, Membership};
use std::time::{Duration, SystemTime};

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

/// The member id of a key `member_key` wrote (for a delete, which carries no value).
fn member_id(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut id = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'_')
            .then(|| key.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(b) => {
                id.push(b);
                i += 3;
            }
            None => {
                id.push(bytes[i]);
                i += 1;
            }
        }
    }
    if id == [0] {
        return String::new();
    }
    String::from_utf8_lossy(&id).into_owned()
}

/// What a watched entry reports. A beat read live keeps its member for the whole
/// `max_age`; one replayed at the start of a watch, for what is left of it by this
/// machine's clock, but at least a second: the server still holds it, so by the server's
/// clock it is live, and a skewed clock must not make every member dead on arrival.
fn event(entry: &kv::Entry, max_age: Duration, replayed: bool) -> Option<MemberEvent> {
    match entry.operation {
        kv::Operation::Put => match serde_json::from_slice::<Member>(&entry.value) {
            Ok(member) => {
                let live_for = if replayed {
                    max_age
                        .saturating_sub(age(entry))
                        .max(Duration::from_secs(1))
                } else {
                    max_age
                };
                Some(MemberEvent::Beat { member, live_for })
            }
            // One bad heartbeat must not hide every other edge.
            Err(error) => {
                tracing::warn!(key = %entry.key, %error, "skipping undecodable membership entry");
                None
            }
        },
        kv::Operation::Delete | kv::Operation::Purge => Some(MemberEvent::Left {
            id: member_id(&entry.key),
        }),
    }
}

/// How long ago the server took `entry`, by this machine's clock.
fn age(entry: &kv::Entry) -> Duration {
    let created_ns = entry.created.unix_timestamp_nanos();
    let now_ns = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(created_ns);
    let ns = now_ns
        .saturating_sub(created_ns)
        .clamp(0, i128::from(u64::MAX));
    Duration::from_nanos(ns as u64)
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

    /// A KV watch with history: the bucket keeps one value per key, so the replay is the
    /// latest beat (or delete) of every member, the last of it marked by `delta == 0`.
    async fn watch(&self) -> transport::Result<BoxStream<'static, transport::Result<MemberEvent>>> {
        let store = self.store();
        // The bucket's own TTL: an existing bucket keeps the one it was created with.
        let max_age = store.stream.cached_info().config.max_age;
        let max_age = if max_age.is_zero() {
            self.bucket.max_age
        } else {
            max_age
        };
        let watch = store
            .watch_with_history(">")
            .await
            .map_err(|e| NatsError::subscribe(&store.prefix, e))?;
        let bucket = store.name.clone();
        let mut replaying = true;
        Ok(watch
            .flat_map(move |item| {
                let mut out = Vec::with_capacity(2);
                match item {
                    Ok(entry) => {
                        out.extend(event(&entry, max_age, replaying).map(Ok));
                        if replaying && entry.delta == 0 {
                            replaying = false;
                            out.push(Ok(MemberEvent::Current));
                        }
                    }
                    Err(e) => out.push(Err(NatsError::subscribe(&bucket, e).into())),
                }
                futures::stream::iter(out)
            })
            .boxed())
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

    #[test]
    fn member_ids_come_back_from_their_keys() {
        for id in ["edge-0", "edge.0", "edge_0", "", "ünï", "a_41"] {
            assert_eq!(member_id(&member_key(id)), id);
        }
    }
}
