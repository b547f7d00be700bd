//! Why a CSDS request is not answered, and the gRPC status each is.

use tonic::Status;

pub type Result<T, E = CsdsError> = std::result::Result<T, E>;

/// Why a CSDS request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsdsError {
    /// A `node_matchers` entry asks what this server does not match on.
    #[error(
        "node_matchers[{index}]: {what} is not supported; match on node_id (exact, prefix, \
         suffix, contains or safe_regex)"
    )]
    UnsupportedMatcher { index: usize, what: &'static str },
    /// A `node_matchers` entry's node ID matcher has no pattern.
    #[error("node_matchers[{index}]: node_id has no match pattern")]
    NoPattern { index: usize },
    /// A `safe_regex` that does not compile (or is over the size limit).
    #[error("node_matchers[{index}]: safe_regex {regex:?}: {reason}")]
    BadRegex {
        index: usize,
        regex: String,
        reason: String,
    },
    /// On the secure listener, the caller proved no identity.
    #[error(
        "CSDS on the secure xDS port answers an identity of the control plane's namespace \
         {system_namespace:?} (a bearer token or a client certificate of the mesh); {reason}"
    )]
    Unauthenticated {
        system_namespace: String,
        reason: String,
    },
    /// The caller's identity may not read the proxies' status.
    #[error("CSDS refused: {0}")]
    Denied(String),
}

impl From<CsdsError> for Status {
    fn from(e: CsdsError) -> Status {
        let message = e.to_string();
        match e {
            CsdsError::UnsupportedMatcher { .. }
            | CsdsError::NoPattern { .. }
            | CsdsError::BadRegex { .. } => Status::invalid_argument(message),
            CsdsError::Unauthenticated { .. } => Status::unauthenticated(message),
            CsdsError::Denied(_) => Status::permission_denied(message),
        }
    }
}
