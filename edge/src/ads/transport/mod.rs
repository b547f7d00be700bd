//! The ADS gRPC transport, below tonic's codecs: tonic's server (HTTP/2, graceful
//! shutdown) routes the service's requests here, and this moves bytes between HTTP/2 and
//! the stream tasks without keeping a buffer per stream.
//!
//! ```text
//!  DATA chunks ──► Inbound: Deframer ──► prost decode ──► stream task (state machine)
//!                  (a message is a slice of its chunk; a split one is gathered in a
//!                   buffer of its exact size, gone with the message)
//!  stream task ──► encode: one exact-size Bytes (prefix + protobuf) ──► bounded channel
//!              ──► Outbound body: a DATA chunk per response, then grpc-status trailers
//! ```
//!
//! tonic's codec path would keep, per stream, an encode buffer as large as the largest
//! response ever sent (a CDS response is ~100 KB) and a decode buffer as large as the
//! largest request.

mod encode;
mod framing;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod inbound;

pub(crate) use encode::frame;
pub use encode::{
    DeltaResource, DeltaResponse, Encoded, SotwResponse, delta_resources, sotw_resources,
};

use super::connection::{self, Who};
use super::outbound::Outbound;
use super::protocol::Protocol;
use super::relay;
use super::shared::Shared;
use super::{DeltaStream, SotwStream};
use crate::tls::PeerInfo;
use bytes::Bytes;
use futures::future::BoxFuture;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use http_body::Body;
use inbound::Inbound;
use shoal_proto::security::Authenticator;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::Status;
use tonic::server::NamedService;

/// The gRPC service name.
pub const SERVICE: &str = "envoy.service.discovery.v3.AggregatedDiscoveryService";
/// The state-of-the-world method's path.
pub const SOTW_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
/// The incremental method's path.
pub const DELTA_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

const GRPC: HeaderValue = HeaderValue::from_static("application/grpc");

/// The ADS gRPC service of one listener, to mount with
/// `tonic::transport::Server::add_service`.
#[derive(Clone)]
pub struct AdsService {
    shared: Arc<Shared>,
    listener: Arc<Listener>,
}

/// What differs between the plaintext and the secure listener.
struct Listener {
    /// Turns what a stream presents into its identity.
    authenticator: Arc<dyn Authenticator>,
    /// Over TLS: a stream that proves nothing is refused.
    secure: bool,
}

impl AdsService {
    pub(crate) fn new(
        shared: Arc<Shared>,
        authenticator: Arc<dyn Authenticator>,
        secure: bool,
    ) -> Self {
        AdsService {
            shared,
            listener: Arc::new(Listener {
                authenticator,
                secure,
            }),
        }
    }
}

impl NamedService for AdsService {
    const NAME: &'static str = SERVICE;
}

impl<B> tower_service::Service<http::Request<B>> for AdsService
where
    B: Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: std::fmt::Display,
{
    type Response = http::Response<Outbound>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let (shared, listener) = (self.shared.clone(), self.listener.clone());
        match req.uri().path() {
            SOTW_PATH => {
                Box::pin(async move { Ok(open::<SotwStream, B>(shared, &listener, req).await) })
            }
            DELTA_PATH => {
                Box::pin(async move { Ok(open::<DeltaStream, B>(shared, &listener, req).await) })
            }
            path => {
                let status = Status::unimplemented(format!(
                    "{path} is not a method of this server; it serves {SOTW_PATH} and \
                     {DELTA_PATH}"
                ));
                Box::pin(std::future::ready(Ok(status.into_http())))
            }
        }
    }
}

/// Admits one stream: its response headers go out once the first request is accepted, a
/// refusal is a trailers-only response (what tonic's client reports as the call's error).
async fn open<M: Protocol, B>(
    shared: Arc<Shared>,
    listener: &Listener,
    req: http::Request<B>,
) -> http::Response<Outbound>
where
    B: Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: std::fmt::Display,
{
    if let Some(encoding) = req.headers().get("grpc-encoding")
        && encoding != "identity"
    {
        let mut refused = Status::unimplemented(format!(
            "request compression {encoding:?} is not supported; turn off gRPC compression \
             on the xDS client"
        ))
        .into_http::<Outbound>();
        refused
            .headers_mut()
            .insert("grpc-accept-encoding", HeaderValue::from_static("identity"));
        return refused;
    }
    // The TLS handshake's verified client certificate; none on plaintext.
    let peer = req.extensions().get::<PeerInfo>();
    // Relayed by another edge: served here, whatever this edge's ring says (no second
    // hop), as the identity the relaying edge authenticated. Taken only from a peer that
    // proved to be an edge; relay headers from anyone else refuse the stream.
    let who = match relay::relayed_identity(&shared.config.edge_identity, peer, req.headers()) {
        Ok(Some(identity)) => Who::Relayed(identity),
        Ok(None) => Who::Presents {
            authenticator: listener.authenticator.clone(),
            credentials: crate::tls::peer::credentials(
                req.headers()
                    .get(AUTHORIZATION)
                    .and_then(|v| v.to_str().ok()),
                peer,
            ),
            secure: listener.secure,
        },
        Err(status) => return status.into_http(),
    };
    let inbound = Inbound::<B, M::Request>::new(req.into_body(), shared.config.max_request_bytes);
    match connection::accept::<M, _>(&shared, inbound, who).await {
        Ok(body) => {
            let mut resp = http::Response::new(body);
            resp.headers_mut().insert(CONTENT_TYPE, GRPC);
            resp
        }
        Err(status) => status.into_http(),
    }
}

#[cfg(test)]
mod tests;
