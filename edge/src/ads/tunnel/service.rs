//! The owner's side of a tunnel: another edge, proven by its client certificate, passes
//! a proxy's connection here; it becomes a connection of the listener the proxy reached
//! there, with the certificates the proxy presented, and this edge's HTTP/2 server
//! serves it as its own. Its response body is what that server writes.

use super::Origin;
use super::pipe::pipe;
use super::tunnel_io::{Closed, TunnelIo};
use crate::ads::shared::Shared;
use crate::ads::transport::relay_header::{
    TUNNEL_ORIGIN, TUNNEL_PATH, TUNNEL_PEER_CERTS, TUNNEL_REMOTE, TUNNEL_SERVICE, parse_peer_certs,
};
use crate::tls::PeerInfo;
use bytes::Bytes;
use futures::future::BoxFuture;
use http_body::Body;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use tonic::Status;
use tonic::server::NamedService;
use tracing::debug;

/// The tunnel endpoint, to mount on the secure listener's server.
#[derive(Clone)]
pub struct TunnelService {
    shared: Arc<Shared>,
}

impl TunnelService {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        TunnelService { shared }
    }
}

impl NamedService for TunnelService {
    const NAME: &'static str = TUNNEL_SERVICE;
}

impl<B> tower_service::Service<http::Request<B>> for TunnelService
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let resp = match take(&self.shared, req) {
            Ok(body) => http::Response::new(body),
            Err(status) => {
                debug!(error = %status.message(), "tunnel refused");
                status.into_http()
            }
        };
        Box::pin(std::future::ready(Ok(resp)))
    }
}

/// Takes the tunnel `req` into its listener's server: the response body is what that
/// server writes to it.
fn take<B>(shared: &Shared, req: http::Request<B>) -> Result<tonic::body::Body, Status>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if req.uri().path() != TUNNEL_PATH {
        return Err(Status::unimplemented(format!(
            "{} is not a method of this server",
            req.uri().path()
        )));
    }
    let edge = &shared.config.edge_identity;
    let peer = req.extensions().get::<PeerInfo>();
    if peer.and_then(|p| p.spiffe.as_ref()) != Some(edge) {
        return Err(Status::permission_denied(format!(
            "tunnels are taken only from another Shoal edge (a client certificate for {edge} \
             under the mesh root)"
        )));
    }
    // Refused, the relaying edge serves the proxy itself.
    if *shared.draining.borrow() || shared.refusing.load(Ordering::Acquire) {
        return Err(Status::unavailable("this edge is draining"));
    }
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    let origin = Origin::parse(header(TUNNEL_ORIGIN)).ok_or_else(|| {
        Status::invalid_argument(format!(
            "{TUNNEL_ORIGIN} {:?}: expected plaintext or secure",
            header(TUNNEL_ORIGIN)
        ))
    })?;
    let certificates: Arc<[Bytes]> = parse_peer_certs(header(TUNNEL_PEER_CERTS))
        .map_err(Status::invalid_argument)?
        .into();
    let closed = Arc::new(Closed::default());
    let info = PeerInfo {
        remote: header(TUNNEL_REMOTE).parse().ok(),
        spiffe: certificates
            .first()
            .and_then(|c| crate::tls::peer::spiffe_id(c)),
        certificates,
        closer: Some(closed.closer()),
    };
    let Some(inbox) = shared.tunnels.get(origin) else {
        return Err(Status::unavailable(format!(
            "this edge has no {} listener",
            origin.as_str()
        )));
    };
    let (writer, body) = pipe(shared.config.tunnel_buffer_bytes);
    let io = TunnelIo::new(
        tonic::body::Body::new(req.into_body()),
        writer,
        info,
        closed,
    );
    let io = Box::new(io);
    inbox(io).map_err(|_| {
        Status::unavailable(format!(
            "the {} listener is not taking connections",
            origin.as_str()
        ))
    })?;
    Ok(tonic::body::Body::new(body))
}
