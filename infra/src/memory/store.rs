//! `MemorySnapshotStore`: chunk and manifest maps whose TTLs are checked on read and
//! swept on write, and a forward-only `latest`.

use super::lock;
use async_trait::async_trait;
use bytes::Bytes;
use shoal_proto::snapshot::ChunkHash;
use shoal_proto::transport::{Result, SnapshotStore};
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// A value and when it expires.
type Expiring = (Bytes, Instant);

#[derive(Default)]
struct State {
    chunks: HashMap<ChunkHash, Expiring>,
    manifests: HashMap<u64, Expiring>,
    latest: Option<u64>,
}

#[derive(Default)]
pub struct MemorySnapshotStore {
    state: Mutex<State>,
}

impl MemorySnapshotStore {
    pub fn new() -> Self {
        Self::default()
    }
}

fn live<K: Eq + Hash>(map: &HashMap<K, Expiring>, key: &K, now: Instant) -> Option<Bytes> {
    map.get(key)
        .filter(|(_, expires)| *expires > now)
        .map(|(value, _)| value.clone())
}

/// Drops expired entries so memory stays bounded by what is live.
fn sweep<K>(map: &mut HashMap<K, Expiring>, now: Instant) {
    map.retain(|_, (_, expires)| *expires > now);
}

#[async_trait]
impl SnapshotStore for MemorySnapshotStore {
    async fn missing_chunks(&self, hashes: &[ChunkHash]) -> Result<Vec<ChunkHash>> {
        let state = lock(&self.state);
        let now = Instant::now();
        Ok(hashes
            .iter()
            .filter(|h| live(&state.chunks, h, now).is_none())
            .cloned()
            .collect())
    }

    async fn put_chunks(&self, chunks: &[(ChunkHash, Bytes)], ttl: Duration) -> Result<()> {
        let mut state = lock(&self.state);
        let now = Instant::now();
        sweep(&mut state.chunks, now);
        for (hash, bytes) in chunks {
            state.chunks.insert(*hash, (bytes.clone(), now + ttl));
        }
        Ok(())
    }

    async fn refresh_chunks(&self, hashes: &[ChunkHash], ttl: Duration) -> Result<()> {
        let mut state = lock(&self.state);
        let now = Instant::now();
        for hash in hashes {
            // Like PEXPIRE: an expired or absent chunk is not revived.
            if let Some((_, expires)) = state.chunks.get_mut(hash).filter(|(_, e)| *e > now) {
                *expires = now + ttl;
            }
        }
        Ok(())
    }

    async fn get_chunks(&self, hashes: &[ChunkHash]) -> Result<Vec<Option<Bytes>>> {
        let state = lock(&self.state);
        let now = Instant::now();
        Ok(hashes.iter().map(|h| live(&state.chunks, h, now)).collect())
    }

    async fn put_manifest(&self, version: u64, manifest: Bytes, ttl: Duration) -> Result<()> {
        let mut state = lock(&self.state);
        let now = Instant::now();
        sweep(&mut state.manifests, now);
        state.manifests.insert(version, (manifest, now + ttl));
        Ok(())
    }

    async fn get_manifest(&self, version: u64) -> Result<Option<Bytes>> {
        let state = lock(&self.state);
        Ok(live(&state.manifests, &version, Instant::now()))
    }

    async fn advance_latest(&self, version: u64) -> Result<bool> {
        let mut state = lock(&self.state);
        if state.latest.is_some_and(|latest| latest >= version) {
            return Ok(false);
        }
        state.latest = Some(version);
        Ok(true)
    }

    async fn latest(&self) -> Result<Option<u64>> {
        Ok(lock(&self.state).latest)
    }
}
