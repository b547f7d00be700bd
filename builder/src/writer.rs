//! Writes a built snapshot: new chunks and pages, the root manifest, `latest` (forward
//! only), then the announcement. Each step is idempotent, so a retried or duplicated
//! write is harmless. Pages are content-addressed like chunks and stored with them
//! (`shoal:chunk:<hash>`, the chunk TTL, refreshed and restored alike).

use crate::snapshot::Built;
use bytes::Bytes;
use shoal_proto::change::ChangeSet;
use shoal_proto::snapshot::{ChunkHash, SnapshotError};
use shoal_proto::transport::{Bus, SnapshotEvent, SnapshotStore, TransportError};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
}

/// How long snapshot data lives in the store.
#[derive(Clone, Debug)]
pub struct Retention {
    /// Manifests expire after this; the latest is refreshed while the builder runs.
    pub manifest_ttl: Duration,
    /// Chunks and pages expire after this unless a live manifest refreshes them.
    pub chunk_ttl: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            manifest_ttl: Duration::from_secs(600),
            chunk_ttl: Duration::from_secs(3600),
        }
    }
}

/// What a write did, for metrics and logs.
#[derive(Debug, Default)]
pub struct WriteStats {
    /// Chunks written (a restore, which does not tell them apart, counts pages here).
    pub chunks_written: usize,
    pub pages_written: usize,
    /// Chunks, pages and the manifest.
    pub bytes_written: usize,
    pub advanced: bool,
}

pub struct Writer {
    pub store: Arc<dyn SnapshotStore>,
    pub bus: Arc<dyn Bus>,
    pub retention: Retention,
}

impl Writer {
    /// Writes `built` and, if `latest` advanced, announces it with `changes` (relative to
    /// snapshot `base`).
    pub async fn write(
        &self,
        built: &Built,
        base: u64,
        changes: ChangeSet,
    ) -> Result<WriteStats, WriteError> {
        let mut stats = WriteStats::default();
        // Chunks and pages before the manifest that names them.
        let blobs = || built.new_chunks.iter().chain(&built.new_pages);
        let hashes: Vec<ChunkHash> = blobs().map(|(h, _)| *h).collect();
        let missing: HashSet<ChunkHash> = self
            .store
            .missing_chunks(&hashes)
            .await?
            .into_iter()
            .collect();
        let to_write: Vec<(ChunkHash, Bytes)> = blobs()
            .filter(|(h, _)| missing.contains(h))
            .map(|(h, b)| (*h, Bytes::copy_from_slice(b)))
            .collect();
        stats.chunks_written = built
            .new_chunks
            .iter()
            .filter(|(h, _)| missing.contains(h))
            .count();
        stats.pages_written = to_write.len() - stats.chunks_written;
        stats.bytes_written = to_write.iter().map(|(_, b)| b.len()).sum();
        if !to_write.is_empty() {
            self.store
                .put_chunks(&to_write, self.retention.chunk_ttl)
                .await?;
        }
        let manifest = built.manifest.encode()?;
        stats.bytes_written += manifest.len();
        self.store
            .put_manifest(
                built.manifest.version,
                manifest.into(),
                self.retention.manifest_ttl,
            )
            .await?;
        stats.advanced = self.store.advance_latest(built.manifest.version).await?;
        if stats.advanced {
            let event = SnapshotEvent {
                version: built.manifest.version,
                base,
                changes,
            };
            self.bus.publish_snapshot(&event).await?;
        }
        Ok(stats)
    }

    /// Whether the store's `latest` is at least `version`: false once the store lost its
    /// data (a Redis restarted empty, or from an older dump). One small read.
    pub async fn holds(&self, version: u64) -> Result<bool, WriteError> {
        Ok(self.store.latest().await?.is_some_and(|l| l >= version))
    }

    /// Writes whichever of `chunks` (chunks and pages alike) the store lacks.
    pub async fn restore_chunks(
        &self,
        chunks: &[(ChunkHash, Arc<Vec<u8>>)],
    ) -> Result<WriteStats, WriteError> {
        let mut stats = WriteStats::default();
        for batch in chunks.chunks(1024) {
            let hashes: Vec<ChunkHash> = batch.iter().map(|(h, _)| *h).collect();
            let missing = self.store.missing_chunks(&hashes).await?;
            if missing.is_empty() {
                continue;
            }
            let to_write: Vec<(ChunkHash, Bytes)> = batch
                .iter()
                .filter(|(h, _)| missing.contains(h))
                .map(|(h, b)| (*h, Bytes::copy_from_slice(b)))
                .collect();
            stats.chunks_written += to_write.len();
            stats.bytes_written += to_write.iter().map(|(_, b)| b.len()).sum::<usize>();
            self.store
                .put_chunks(&to_write, self.retention.chunk_ttl)
                .await?;
        }
        Ok(stats)
    }

    /// Puts a snapshot the store lost back: every chunk and page it lacks, the manifest,
    /// and `latest` (forward only, so a newer snapshot another builder wrote stays).
    pub async fn restore(
        &self,
        manifest: &[u8],
        version: u64,
        chunks: &[(ChunkHash, Arc<Vec<u8>>)],
    ) -> Result<WriteStats, WriteError> {
        let mut stats = self.restore_chunks(chunks).await?;
        self.store
            .put_manifest(
                version,
                Bytes::copy_from_slice(manifest),
                self.retention.manifest_ttl,
            )
            .await?;
        stats.bytes_written += manifest.len();
        stats.advanced = self.store.advance_latest(version).await?;
        Ok(stats)
    }

    /// Keeps the latest snapshot alive: its manifest and every chunk and page it uses
    /// (`hashes`, from `SnapshotBuilder::hashes`).
    pub async fn refresh(
        &self,
        built_manifest: &[u8],
        version: u64,
        hashes: &[ChunkHash],
    ) -> Result<(), WriteError> {
        self.store
            .put_manifest(
                version,
                Bytes::copy_from_slice(built_manifest),
                self.retention.manifest_ttl,
            )
            .await?;
        for batch in hashes.chunks(1024) {
            self.store
                .refresh_chunks(batch, self.retention.chunk_ttl)
                .await?;
        }
        Ok(())
    }
}
