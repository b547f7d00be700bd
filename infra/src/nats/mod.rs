//! The NATS adapters: the config store and edge membership on JetStream key-value buckets,
//! and the bus (push requests on a durable work-queue stream, snapshot announcements on
//! core NATS).
//!
//! ```text
//! NatsConfigKv  ──► KV shoal_config (stream KV_shoal_config), revision = stream sequence
//! NatsBus       ──► stream SHOAL_PUSH on shoal.push ──► durable pull consumer shoal-builders
//!               ──► core shoal.snapshot (trace context in headers)
//! NatsMembership──► KV shoal_edges, max_age = heartbeat TTL
//! ```

mod bucket;
mod bus;
mod connect;
mod headers;
mod kv;
mod membership;

pub use bus::{NatsBus, NatsBusConfig};
pub use connect::{ConnectConfig, NatsAuth, connect, connect_with};
pub use kv::{NatsConfigKv, NatsConfigKvConfig};
pub use membership::{NatsMembership, NatsMembershipConfig};

use shoal_proto::transport::TransportError;

/// Errors of the NATS adapters. Messages carry the server's reason; at the trait boundary
/// they become `TransportError::Unavailable("nats", ..)` (retry) or `Codec` (bad data).
#[derive(Debug, thiserror::Error)]
pub enum NatsError {
    /// The initial connection failed (reconnects after that are automatic). `url` is
    /// redacted.
    #[error("connect to {url}: {reason}")]
    Connect { url: String, reason: String },
    /// A TLS file named by the configuration cannot be used.
    #[error("connect to {url}: {source}")]
    Tls {
        url: String,
        #[source]
        source: crate::tls::TlsError,
    },
    /// A credentials file (`.creds`, password, token) cannot be read or parsed.
    #[error("NATS credentials file {path}: {reason}")]
    Credentials { path: String, reason: String },
    /// A key-value bucket could not be opened or created.
    #[error("key-value bucket {bucket}: {message}")]
    Bucket { bucket: String, message: String },
    /// A JetStream stream or consumer could not be created or read.
    #[error("jetstream {what}: {message}")]
    JetStream { what: String, message: String },
    /// A publish, or its acknowledgement by JetStream, failed.
    #[error("publish to {subject}: {message}")]
    Publish { subject: String, message: String },
    /// A subscription or watch failed.
    #[error("subscribe to {subject}: {message}")]
    Subscribe { subject: String, message: String },
    /// A read of the bucket did not finish in time.
    #[error("timed out reading {0}")]
    Timeout(String),
    /// A key has characters NATS keys cannot hold.
    #[error("invalid key {0:?}: NATS keys are [-/_=.a-zA-Z0-9], not starting or ending with '.'")]
    InvalidKey(String),
    /// A payload could not be encoded or decoded.
    #[error("codec: {0}")]
    Codec(String),
}

pub type Result<T, E = NatsError> = std::result::Result<T, E>;

impl From<NatsError> for TransportError {
    fn from(error: NatsError) -> Self {
        match error {
            NatsError::InvalidKey(_) | NatsError::Codec(_) => {
                TransportError::Codec(error.to_string())
            }
            _ => TransportError::Unavailable("nats", error.to_string()),
        }
    }
}

/// Why the server refused to create a stream (or the stream under a bucket), if it was for
/// want of room, with what to change: JetStream reserves a stream's whole `max_bytes` when
/// creating it, against a storage cap that defaults to 75% of the disk free (or of the
/// memory) when the server started.
fn no_room(
    error: &async_nats::jetstream::context::CreateStreamError,
    storage: async_nats::jetstream::stream::StorageType,
    max_bytes: i64,
) -> Option<String> {
    use async_nats::jetstream::ErrorCode;
    use async_nats::jetstream::context::CreateStreamErrorKind;
    use async_nats::jetstream::stream::StorageType;
    let CreateStreamErrorKind::JetStream(refusal) = error.kind() else {
        return None;
    };
    let codes = [
        ErrorCode::STORAGE_RESOURCES_EXCEEDED,
        ErrorCode::MEMORY_RESOURCES_EXCEEDED,
        ErrorCode::INSUFFICIENT_RESOURCES,
    ];
    if !codes.contains(&refusal.error_code()) {
        return None;
    }
    let (kind, cap) = match storage {
        StorageType::File => ("file", "max_file_store"),
        StorageType::Memory => ("memory", "max_memory_store"),
    };
    Some(format!(
        "the NATS server has no room to reserve the bound of {max_bytes} bytes of {kind} \
         storage: raise its JetStream `{cap}` or lower the bound (--nats-config-max-bytes, \
         --nats-push-max-bytes) (the server said: {error})"
    ))
}

impl NatsError {
    fn jetstream(what: impl Into<String>, error: impl std::fmt::Display) -> Self {
        NatsError::JetStream {
            what: what.into(),
            message: error.to_string(),
        }
    }

    fn publish(subject: &str, error: impl std::fmt::Display) -> Self {
        NatsError::Publish {
            subject: subject.to_owned(),
            message: error.to_string(),
        }
    }

    fn subscribe(subject: &str, error: impl std::fmt::Display) -> Self {
        NatsError::Subscribe {
            subject: subject.to_owned(),
            message: error.to_string(),
        }
    }
}
