//! The `SnapshotStore` implementation and its configuration.

use super::{RedisStoreError, Result};
use crate::secret::{Secret, redact_url};
use crate::tls::TlsFiles;
use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{Client, ClientTlsConfig, IntoConnectionInfo, Script, TlsCertificates, cmd, pipe};
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
#[derive(Clone)]
pub struct RedisConfig {
    /// `redis://` or `rediss://` (TLS); may carry `user:password@` (redacted wherever
    /// printed).
    pub url: String,
    /// TLS is required when set (a `redis://` URL is upgraded to `rediss://`); the CA, when
    /// given, is the only root the server's certificate is verified against.
    pub tls: Option<TlsFiles>,
    /// ACL user name; overrides the URL's.
    pub username: Option<String>,
    /// `AUTH` password; overrides the URL's.
    pub password: Option<Secret>,
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
            tls: None,
            username: None,
            password: None,
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

    /// The URL as it may be shown: its password replaced by `***`.
    pub fn shown_url(&self) -> String {
        redact_url(&self.url)
    }

    fn is_tls(&self) -> bool {
        self.tls.is_some() || self.url.starts_with("rediss://")
    }

    fn describe(&self) -> String {
        let tls = if self.is_tls() { "TLS" } else { "plaintext" };
        let auth = match (&self.username, &self.password) {
            (Some(user), Some(_)) => format!("user {user} with a password"),
            (None, Some(_)) => "a password".to_owned(),
            _ => "the URL's credentials, if any".to_owned(),
        };
        format!("{tls}, {auth}")
    }
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &self.shown_url())
            .field("tls", &self.tls)
            .field("username", &self.username)
            .field("password", &self.password)
            .field("prefix", &self.prefix)
            .field("batch", &self.batch)
            .field("response_timeout", &self.response_timeout)
            .field("connection_timeout", &self.connection_timeout)
            .field("max_reconnect_delay", &self.max_reconnect_delay)
            .field("connect_retries", &self.connect_retries)
            .finish()
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
        let conn = ConnectionManager::new_with_config(client, manager_config(&config))
            .await
            .map_err(|source| RedisStoreError::Connect {
                url: config.shown_url(),
                how: config.describe(),
                reason: reason(&source),
            })?;
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
        format!("{}:chunk:{hash}", self.prefix)
    }

    fn manifest_key(&self, version: u64) -> String {
        format!("{}:snap:{version}", self.prefix)
    }

    fn latest_key(&self) -> String {
        format!("{}:latest", self.prefix)
    }
}

fn client(config: &RedisConfig) -> Result<Client> {
    let url_error = |source| RedisStoreError::Url {
        url: config.shown_url(),
        source,
    };
    // TLS asked for by a CA or client certificate on a plain URL: the same server, over TLS.
    let url = match config.url.strip_prefix("redis://") {
        Some(rest) if config.tls.is_some() => format!("rediss://{rest}"),
        _ => config.url.clone(),
    };
    let mut info = url.as_str().into_connection_info().map_err(url_error)?;
    let mut settings = info.redis_settings().clone();
    if let Some(user) = &config.username {
        settings = settings.set_username(user);
    }
    if let Some(password) = &config.password {
        settings = settings.set_password(password.expose());
    }
    info = info.set_redis_settings(settings);
    let Some(files) = config.tls.as_ref().filter(|_| config.is_tls()) else {
        return Client::open(info).map_err(url_error);
    };
    let pem = files.load("Redis").map_err(|source| RedisStoreError::Tls {
        url: config.shown_url(),
        source,
    })?;
    let certificates = TlsCertificates {
        client_tls: pem.client.map(|(client_cert, client_key)| ClientTlsConfig {
            client_cert,
            client_key,
        }),
        root_cert: pem.ca,
    };
    Client::build_with_tls(info, certificates).map_err(url_error)
}

/// The server's or the TLS layer's reason, without the library's wrapping.
fn reason(error: &::redis::RedisError) -> String {
    let text = error.to_string();
    if text.contains("WRONGPASS")
        || text.contains("NOAUTH")
        || error.kind() == ::redis::ErrorKind::AuthenticationFailed
    {
        format!("authentication refused: {text}")
    } else if crate::tls::refused(error)
        || ["certificate", "TLS", "handshake", "alert"]
            .iter()
            .any(|t| text.contains(t))
    {
        format!("TLS handshake failed: {text}")
    } else {
        text
    }
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
                    .map(|(hash, _)| *hash),
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
