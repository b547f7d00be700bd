//! The `SnapshotStore` implementation and its configuration.

use super::{RedisStoreError, Result};
use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{Client, Script, cmd, pipe};
use async_trait::async_trait;
use bytes::Bytes;
use shoal_proto::snapshot::ChunkHash;
use shoal_proto::transport::{self, SnapshotStore};
use std::time::Duration;

/// Sets `KEYS[1]` to `ARGV[1]` only if absent or strictly smaller. Compares decimal strings
/// by length then lexically, so the full u64 range is exact (Lua numbers are doubles).
const ADVANCE_LATEST: &str = r"
local cur = redis.call('GET', KEYS[1])
local new = ARGV[1]
if cur and (#cur > #new or (#cur == #new and cur >= new)) then
  return 0
end
redis.call('SET', KEYS[1], new)
return 1
";

/// Where and how the store talks to Redis.
#[derive(Clone, Debug)]
pub struct RedisConfig {
    pub url: String,
    /// Key prefix (`shoal`); tests set their own to share one server.
    pub prefix: String,
    /// Keys per pipelined or `MGET` round trip.
    pub batch: usize,
    /// Per-command response timeout.
    pub response_timeout: Duration,
    /// Timeout of one connection attempt.
    pub connection_timeout: Duration,
    /// Cap of the reconnect backoff.
    pub max_reconnect_delay: Duration,
    /// Connection attempts per reconnect before a command fails as unavailable.
    pub connect_retries: usize,
}

impl RedisConfig {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            prefix: "shoal".into(),
            batch: 512,
            response_timeout: Duration::from_secs(5),
            connection_timeout: Duration::from_secs(5),
            max_reconnect_delay: Duration::from_secs(5),
            connect_retries: 6,
        }
    }

    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }
}

#[derive(Clone)]
pub struct RedisSnapshotStore {
    conn: ConnectionManager,
    prefix: String,
    batch: usize,
    advance: Script,
}

impl RedisSnapshotStore {
    /// Connects now; fails if Redis cannot be reached (after the manager's retries).
    pub async fn connect(config: RedisConfig) -> Result<Self> {
        let client = client(&config)?;
        let conn = ConnectionManager::new_with_config(client, manager_config(&config)).await?;
        Ok(Self::with_connection(conn, &config))
    }

    /// Connects on first use, so a tier can start (and serve what it has) while Redis is
    /// down.
    pub fn connect_lazy(config: RedisConfig) -> Result<Self> {
        let client = client(&config)?;
        let conn = client.get_connection_manager_lazy(manager_config(&config))?;
        Ok(Self::with_connection(conn, &config))
    }

    fn with_connection(conn: ConnectionManager, config: &RedisConfig) -> Self {
        Self {
            conn,
            prefix: config.prefix.clone(),
            batch: config.batch.max(1),
            advance: Script::new(ADVANCE_LATEST),
        }
    }

    fn chunk_key(&self, hash: &ChunkHash) -> String {
        format!("{}:chunk:{}", self.prefix, hash.0)
    }

    fn manifest_key(&self, version: u64) -> String {
        format!("{}:snap:{version}", self.prefix)
    }

    fn latest_key(&self) -> String {
        format!("{}:latest", self.prefix)
    }
}

fn client(config: &RedisConfig) -> Result<Client> {
    Client::open(config.url.as_str()).map_err(|source| RedisStoreError::Url {
        url: config.url.clone(),
        source,
    })
}

fn manager_config(config: &RedisConfig) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_response_timeout(Some(config.response_timeout))
        .set_connection_timeout(Some(config.connection_timeout))
        .set_max_delay(config.max_reconnect_delay)
        .set_number_of_retries(config.connect_retries)
}

fn millis(ttl: Duration) -> u64 {
    // PX 0 is an error; a zero TTL means "expire at once", i.e. 1 ms.
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[async_trait]
impl SnapshotStore for RedisSnapshotStore {
    async fn missing_chunks(&self, hashes: &[ChunkHash]) -> transport::Result<Vec<ChunkHash>> {
        let mut conn = self.conn.clone();
        let mut missing = Vec::new();
        for batch in hashes.chunks(self.batch) {
            let mut p = pipe();
            for hash in batch {
                p.exists(self.chunk_key(hash));
            }
            let exists: Vec<bool> = p
                .query_async(&mut conn)
                .await
                .map_err(RedisStoreError::from)?;
            missing.extend(
                batch
                    .iter()
                    .zip(exists)
                    .filter(|(_, exists)| !exists)
                    .map(|(hash, _)| hash.clone()),
            );
        }
        Ok(missing)
    }

    async fn put_chunks(
        &self,
        chunks: &[(ChunkHash, Bytes)],
        ttl: Duration,
    ) -> transport::Result<()> {
        let mut conn = self.conn.clone();
        for batch in chunks.chunks(self.batch) {
            let mut p = pipe();
            for (hash, bytes) in batch {
                p.cmd("SET")
                    .arg(self.chunk_key(hash))
                    .arg(bytes.as_ref())
                    .arg("PX")
                    .arg(millis(ttl))
                    .ignore();
            }
            let () = p
                .query_async(&mut conn)
                .await
                .map_err(RedisStoreError::from)?;
        }
        Ok(())
    }

    async fn refresh_chunks(&self, hashes: &[ChunkHash], ttl: Duration) -> transport::Result<()> {
        let mut conn = self.conn.clone();
        for batch in hashes.chunks(self.batch) {
            let mut p = pipe();
            for hash in batch {
                p.cmd("PEXPIRE")
                    .arg(self.chunk_key(hash))
                    .arg(millis(ttl))
                    .ignore();
            }
            let () = p
                .query_async(&mut conn)
                .await
                .map_err(RedisStoreError::from)?;
        }
        Ok(())
    }

    async fn get_chunks(&self, hashes: &[ChunkHash]) -> transport::Result<Vec<Option<Bytes>>> {
        let mut conn = self.conn.clone();
        let mut out = Vec::with_capacity(hashes.len());
        for batch in hashes.chunks(self.batch) {
            let keys: Vec<String> = batch.iter().map(|h| self.chunk_key(h)).collect();
            let values: Vec<Option<Vec<u8>>> = cmd("MGET")
                .arg(&keys)
                .query_async(&mut conn)
                .await
                .map_err(RedisStoreError::from)?;
            out.extend(values.into_iter().map(|v| v.map(Bytes::from)));
        }
        Ok(out)
    }

    async fn put_manifest(
        &self,
        version: u64,
        manifest: Bytes,
        ttl: Duration,
    ) -> transport::Result<()> {
        let mut conn = self.conn.clone();
        let () = cmd("SET")
            .arg(self.manifest_key(version))
            .arg(manifest.as_ref())
            .arg("PX")
            .arg(millis(ttl))
            .query_async(&mut conn)
            .await
            .map_err(RedisStoreError::from)?;
        Ok(())
    }

    async fn get_manifest(&self, version: u64) -> transport::Result<Option<Bytes>> {
        let mut conn = self.conn.clone();
        let value: Option<Vec<u8>> = cmd("GET")
            .arg(self.manifest_key(version))
            .query_async(&mut conn)
            .await
            .map_err(RedisStoreError::from)?;
        Ok(value.map(Bytes::from))
    }

    async fn advance_latest(&self, version: u64) -> transport::Result<bool> {
        let mut conn = self.conn.clone();
        let moved: i64 = self
            .advance
            .key(self.latest_key())
            .arg(version.to_string())
            .invoke_async(&mut conn)
            .await
            .map_err(RedisStoreError::from)?;
        Ok(moved == 1)
    }

    async fn latest(&self) -> transport::Result<Option<u64>> {
        let mut conn = self.conn.clone();
        let key = self.latest_key();
        let value: Option<String> = cmd("GET")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .map_err(RedisStoreError::from)?;
        value
            .map(|v| {
                v.parse::<u64>().map_err(|e| RedisStoreError::Corrupt {
                    key,
                    message: format!("{v:?}: {e}"),
                })
            })
            .transpose()
            .map_err(Into::into)
    }
}
