//! The ADS gRPC service of one listener: tonic's server (HTTP/2, graceful shutdown)
//! routes the service's requests here, and this admits each stream (compression, relay
//! headers, credentials) and hands it, as a stream of decoded requests, to its task
//! (`connection`), whose encoded responses make the response body ([`AdsBody`]).

use super::body::AdsBody;
use super::connection::{self, Who};
use super::delta::DeltaStream;
use super::protocol::Protocol;
use super::shared::Shared;
use super::sotw::SotwStream;
use super::transport::relay_header::relayed_identity;
use super::transport::{DELTA_PATH, Inbound, SERVICE, SOTW_PATH};
use crate::tls::PeerInfo;
use bytes::Bytes;
use futures::future::BoxFuture;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use http_body::Body;
use shoal_proto::security::Authenticator;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::Status;
use tonic::server::NamedService;

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
    type Response = http::Response<AdsBody>;
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
) -> http::Response<AdsBody>
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
        .into_http::<AdsBody>();
        refused
            .headers_mut()
            .insert("grpc-accept-encoding", HeaderValue::from_static("identity"));
        return refused;
    }
    // The TLS handshake's verified client certificate; none on plaintext.
    let peer = req.extensions().get::<PeerInfo>();
    // A tunneled connection is closed when its stream is sent away (a hand-off, a drain):
    // a proxy retries on the connection it has, which would bring it back here.
    let closer = peer.and_then(|p| p.closer.clone());
    // Relayed by another edge: served here, whatever this edge's ring says (no second
    // hop), as the identity the relaying edge authenticated. Taken only from a peer that
    // proved to be an edge; relay headers from anyone else refuse the stream.
    let who = match relayed_identity(&shared.config.edge_identity, peer, req.headers()) {
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
            let body = body.closing(closer);
            let mut resp = http::Response::new(body);
            resp.headers_mut().insert(CONTENT_TYPE, GRPC);
            resp
        }
        Err(status) => {
            if let Some(closer) = closer.filter(|_| status.code() == tonic::Code::Unavailable) {
                closer.close_unless_shared(0);
            }
            status.into_http()
        }
    }
}

#[cfg(test)]
mod tests;
