//! `RedisSnapshotStore`: the snapshot store on Redis, through a reconnecting
//! `ConnectionManager`.
//!
//! ```text
//! <prefix>:chunk:<hash>    chunk or manifest page bytes, SET .. PX ttl, PEXPIRE'd while a
//!                          live manifest uses it
//! <prefix>:snap:<version>  root manifest bytes (the pages), SET .. PX ttl
//! <prefix>:latest          decimal version, advanced only forward by a Lua compare-and-set
//! ```
//! Batch calls are pipelined in bounded batches, so one call is a few round trips however
//! many chunks a snapshot has.

mod store;

pub use store::{RedisConfig, RedisSnapshotStore};

use shoal_proto::transport::TransportError;

/// Errors of the Redis snapshot store.
#[derive(Debug, thiserror::Error)]
pub enum RedisStoreError {
    /// The URL could not be parsed (or TLS set up from it). `url` is redacted.
    #[error("invalid redis url {url}: {source}")]
    Url {
        url: String,
        #[source]
        source: ::redis::RedisError,
    },
    /// A TLS file named by the configuration cannot be used.
    #[error("connect to {url}: {source}")]
    Tls {
        url: String,
        #[source]
        source: crate::tls::TlsError,
    },
    /// The first connection failed: unreachable, the TLS handshake refused, or the
    /// credentials refused. `url` is redacted; `how` says TLS or not and which credentials.
    #[error("connect to {url} ({how}): {reason}")]
    Connect {
        url: String,
        how: String,
        reason: String,
    },
    /// The password file cannot be read.
    #[error("Redis credentials file {path}: {reason}")]
    Credentials { path: String, reason: String },
    /// Redis could not be reached, or a command failed in flight.
    #[error("redis: {0}")]
    Command(#[from] ::redis::RedisError),
    /// A stored value is not what Shoal wrote there (e.g. `latest` not a number).
    #[error("corrupt value at {key}: {message}")]
    Corrupt { key: String, message: String },
}

pub type Result<T, E = RedisStoreError> = std::result::Result<T, E>;

impl From<RedisStoreError> for TransportError {
    fn from(error: RedisStoreError) -> Self {
        match error {
            RedisStoreError::Corrupt { .. } => TransportError::Codec(error.to_string()),
            RedisStoreError::Url { .. }
            | RedisStoreError::Tls { .. }
            | RedisStoreError::Connect { .. }
            | RedisStoreError::Credentials { .. }
            | RedisStoreError::Command(_) => {
                TransportError::Unavailable("redis", error.to_string())
            }
        }
    }
}
