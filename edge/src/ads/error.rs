//! Stream errors, and how each reaches the proxy as a precise `tonic::Status`.

use crate::proxy::ProxyError;
use shoal_proto::security::{AuthnError, ClaimMismatch};
use std::time::Duration;
use tonic::Status;

/// Why an ADS stream ends (or is refused).
#[derive(Debug, thiserror::Error)]
pub enum AdsError {
    #[error(transparent)]
    Node(#[from] ProxyError),
    /// What the stream presented proves no identity.
    #[error("unauthenticated: {0}")]
    Unauthenticated(#[from] AuthnError),
    /// The node claims a namespace / service account its identity is not.
    #[error("permission denied: {0}")]
    NodeClaim(#[from] ClaimMismatch),
    #[error("request has no type_url")]
    MissingTypeUrl,
    #[error("the proxy did not take a response within {0:?}")]
    SendTimeout(Duration),
    #[error("this edge is shutting down")]
    ShuttingDown,
    /// Another edge is to serve the proxy (a ring change, or this edge draining).
    #[error("the proxy was handed off to another edge")]
    HandedOff,
    /// A newer stream of the same proxy ID reached this edge and took this one's place.
    #[error("a newer stream of this proxy replaced this one")]
    Replaced,
    #[error("this edge already serves its maximum of {0} xDS streams")]
    TooManyStreams(usize),
    #[error("new streams arrive faster than this edge admits them ({0}/s)")]
    RateLimited(f64),
    /// A subscription would make the stream hold more names than it may.
    #[error(
        "a request for {type_url} would subscribe this stream to {total} resource names, \
         over its limit of {max}"
    )]
    TooManyNames {
        total: usize,
        max: usize,
        type_url: String,
    },
    /// A request named a resource whose name is not UTF-8 (protobuf strings must be).
    #[error("a request for {type_url} names a resource whose name is not UTF-8")]
    NameNotUtf8 { type_url: String },
    /// The proxy went away: nothing to tell it.
    #[error("the proxy closed the stream")]
    ClientGone,
    /// The proxy holds a snapshot this edge knows of but has not pulled yet.
    #[error("the proxy holds snapshot {reported}; this edge still serves {held}")]
    Behind { reported: u64, held: u64 },
}

/// Why a live stream (served or relayed) is asked to end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Another edge is to serve the proxy.
    HandedOff,
    /// A newer stream of the same proxy ID took its place here.
    Replaced,
    /// This edge is draining.
    Draining,
}

impl From<Ending> for AdsError {
    fn from(e: Ending) -> AdsError {
        match e {
            Ending::HandedOff => AdsError::HandedOff,
            Ending::Replaced => AdsError::Replaced,
            Ending::Draining => AdsError::ShuttingDown,
        }
    }
}

pub type Result<T, E = AdsError> = std::result::Result<T, E>;

impl AdsError {
    /// The status the proxy sees, with a hint an operator can act on.
    pub fn to_status(&self) -> Status {
        match self {
            AdsError::Node(ProxyError::MissingNode) => Status::invalid_argument(
                "the first request on an ADS stream must carry `node`; set node.id (and \
                 node.metadata NAMESPACE/LABELS) in the proxy's bootstrap",
            ),
            AdsError::Node(e @ ProxyError::BadNodeId(_)) => Status::invalid_argument(format!(
                "{e}; expected e.g. sidecar~10.0.0.1~web-1.shop~shop.svc.cluster.local"
            )),
            AdsError::Node(e @ ProxyError::BadProxyType(..)) => {
                Status::invalid_argument(e.to_string())
            }
            AdsError::Unauthenticated(e) => Status::unauthenticated(format!(
                "{e}; present the pod's service-account token (gRPC metadata \
                 `authorization: Bearer <token>`) or a client certificate from the mesh CA"
            )),
            AdsError::NodeClaim(e) => Status::permission_denied(format!(
                "{e}; a proxy's node must name the namespace (and service account) of the \
                 identity it authenticates with"
            )),
            AdsError::MissingTypeUrl => Status::invalid_argument(
                "ADS requests must set type_url, e.g. \
                 type.googleapis.com/envoy.config.cluster.v3.Cluster",
            ),
            AdsError::SendTimeout(t) => Status::deadline_exceeded(format!(
                "the proxy did not read xDS responses within {t:?} (SHOAL_SEND_TIMEOUT); \
                 closing the stream, reconnect to resync"
            )),
            AdsError::ShuttingDown => {
                Status::unavailable("edge is draining; reconnect and another edge will serve")
            }
            AdsError::HandedOff => Status::unavailable(
                "handed off: another edge now serves this proxy; reconnect (through the \
                 edge Service) and resume",
            ),
            AdsError::Replaced => Status::unavailable(
                "replaced: a newer stream with this node id connected to this edge, which \
                 keeps one stream per proxy; if this client is still live, two proxies share \
                 one node id (give each its own)",
            ),
            AdsError::TooManyStreams(n) => Status::resource_exhausted(format!(
                "edge at its limit of {n} xDS streams; retry against another edge, raise \
                 SHOAL_XDS_MAX_STREAMS or scale out edges"
            )),
            AdsError::RateLimited(rate) => Status::resource_exhausted(format!(
                "new xDS streams exceed this edge's admission rate of {rate}/s \
                 (SHOAL_MAX_REQUESTS_PER_SECOND); retry with backoff or scale out edges"
            )),
            AdsError::TooManyNames { .. } => Status::resource_exhausted(format!(
                "{self} (SHOAL_XDS_MAX_NAMES_PER_STREAM, --max-names-per-stream); subscribe \
                 to fewer names (a Sidecar resource narrows a proxy's scope) or raise the limit"
            )),
            AdsError::NameNotUtf8 { .. } => Status::invalid_argument(self.to_string()),
            AdsError::ClientGone => Status::cancelled("the proxy closed the stream"),
            AdsError::Behind { .. } => Status::unavailable(format!(
                "{self}, and has not pulled the newer one within SHOAL_XDS_RESUME_WAIT; \
                 keep the config and reconnect (this edge never sends an older one)"
            )),
        }
    }
}

impl From<AdsError> for Status {
    fn from(e: AdsError) -> Status {
        e.to_status()
    }
}
