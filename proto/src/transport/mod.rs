//! The contracts between tiers: what travels on the bus and sits in the stores, and the
//! traits the NATS/Redis adapters and their in-process twins implement (`shoal-infra`).
//!
//! | contract            | NATS / Redis                          | trait           |
//! |---------------------|---------------------------------------|-----------------|
//! | config store        | JetStream KV `shoal_config`           | [`ConfigKv`]    |
//! | push requests       | JetStream stream on `shoal.push`      | [`Bus`]         |
//! | snapshot announce   | `shoal.snapshot`                      | [`Bus`]         |
//! | snapshots           | Redis `shoal:chunk:*`, `shoal:snap:*` | [`SnapshotStore`] |
//! | edge membership     | JetStream KV `shoal_edges` (TTL)      | [`Membership`]  |

mod keys;
mod wire;

pub use keys::{KvOwner, config_kv_key, parse_config_kv_key, parse_legacy_config_kv_key};
pub use wire::{SnapshotEvent, TraceContext, decode_config, encode_config};

use crate::snapshot::ChunkHash;
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use std::time::Duration;

pub const CONFIG_BUCKET: &str = "shoal_config";
pub const EDGES_BUCKET: &str = "shoal_edges";
pub const PUSH_SUBJECT: &str = "shoal.push";
pub const PUSH_STREAM: &str = "SHOAL_PUSH";
pub const SNAPSHOT_SUBJECT: &str = "shoal.snapshot";
pub const BUILDER_QUEUE: &str = "shoal-builders";

/// Errors any transport can return.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The server could not be reached or the request failed in flight: retry.
    #[error("{0} unavailable: {1}")]
    Unavailable(&'static str, String),
    /// A value could not be encoded or decoded.
    #[error("codec: {0}")]
    Codec(String),
    /// A subscriber fell behind and missed messages; it must resync from the store.
    #[error("lagged: missed {0} messages")]
    Lagged(u64),
    /// The transport was shut down.
    #[error("closed")]
    Closed,
}

pub type Result<T, E = TransportError> = std::result::Result<T, E>;

/// One entry of the config KV: `value == None` is a delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvEntry {
    pub key: String,
    pub value: Option<Bytes>,
    pub revision: u64,
}

/// The shared config store: a key-value bucket whose revision totally orders every
/// change from every cluster.
#[async_trait]
pub trait ConfigKv: Send + Sync + 'static {
    /// Writes `value` at `key`; returns the revision of the write.
    async fn put(&self, key: &str, value: Bytes) -> Result<u64>;
    /// Deletes `key`; returns the revision of the delete.
    async fn delete(&self, key: &str) -> Result<u64>;
    /// Every key currently set with its value (deleted keys omitted).
    async fn entries(&self) -> Result<Vec<KvEntry>>;
    /// The latest value of every key (deletes included, so a replica sees them), then
    /// every later change, in revision order.
    async fn watch(&self) -> Result<BoxStream<'static, Result<KvEntry>>>;
}

/// A message taken from a durable queue; it is redelivered unless acknowledged.
pub struct Delivery<T> {
    pub message: T,
    pub acker: Box<dyn Ack>,
}

#[async_trait]
pub trait Ack: Send + Sync {
    async fn ack(&self) -> Result<()>;
}

/// The message bus between tiers.
#[async_trait]
pub trait Bus: Send + Sync + 'static {
    /// Publishes a push request durably (kept while no builder runs). Its change set's
    /// trace context travels with it.
    async fn publish_push(&self, request: &crate::push::PushRequest) -> Result<()>;
    /// Push requests shared by every builder in the queue group.
    async fn push_requests(
        &self,
    ) -> Result<BoxStream<'static, Result<Delivery<crate::push::PushRequest>>>>;
    /// Announces a written snapshot.
    async fn publish_snapshot(&self, event: &SnapshotEvent) -> Result<()>;
    /// Every snapshot announcement; `Err(Lagged)` means some were missed.
    async fn snapshot_events(&self) -> Result<BoxStream<'static, Result<SnapshotEvent>>>;
}

/// Where snapshots live: content-addressed chunks, manifests by version, and `latest`.
#[async_trait]
pub trait SnapshotStore: Send + Sync + 'static {
    /// Which of `hashes` the store does not hold.
    async fn missing_chunks(&self, hashes: &[ChunkHash]) -> Result<Vec<ChunkHash>>;
    /// Writes chunks, each kept for at least `ttl` unless refreshed.
    async fn put_chunks(&self, chunks: &[(ChunkHash, Bytes)], ttl: Duration) -> Result<()>;
    /// Extends the lifetime of chunks a live manifest uses.
    async fn refresh_chunks(&self, hashes: &[ChunkHash], ttl: Duration) -> Result<()>;
    /// Reads chunks; `None` where one is missing.
    async fn get_chunks(&self, hashes: &[ChunkHash]) -> Result<Vec<Option<Bytes>>>;
    /// Writes the manifest of `version`, kept for `ttl`.
    async fn put_manifest(&self, version: u64, manifest: Bytes, ttl: Duration) -> Result<()>;
    async fn get_manifest(&self, version: u64) -> Result<Option<Bytes>>;
    /// Sets `latest` to `version` only if that moves it forward; returns whether it did.
    async fn advance_latest(&self, version: u64) -> Result<bool>;
    async fn latest(&self) -> Result<Option<u64>>;
}

/// One live edge, as it heartbeats into the membership bucket.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Member {
    pub id: String,
    pub xds_addr: String,
}

/// What a membership watch reports, in the order the bucket took the writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberEvent {
    /// `member` heartbeated: it stays live for `live_for` unless it beats again (a member
    /// replayed at the start of a watch has less left than a fresh beat).
    Beat { member: Member, live_for: Duration },
    /// `id` left (its key was deleted). A member that stops beating is not reported: it
    /// expires after its `live_for`.
    Left { id: String },
    /// Every member live when the watch started has been reported: the set is complete,
    /// and what follows happens after the watch started.
    Current,
}

/// Edge membership: TTL'd heartbeats; every edge reads the same member set.
#[async_trait]
pub trait Membership: Send + Sync + 'static {
    /// Writes (or refreshes) this edge's heartbeat.
    async fn heartbeat(&self, member: &Member) -> Result<()>;
    /// Removes this edge at shutdown, so the ring shrinks without waiting for the TTL.
    async fn leave(&self, id: &str) -> Result<()>;
    /// The live members, sorted by id.
    async fn members(&self) -> Result<Vec<Member>>;
    /// Follows the members: every live member, then [`MemberEvent::Current`], then each
    /// heartbeat and leave as it happens. The stream ends (or yields an error) when the
    /// transport loses it; the caller watches again.
    async fn watch(&self) -> Result<BoxStream<'static, Result<MemberEvent>>>;
}
