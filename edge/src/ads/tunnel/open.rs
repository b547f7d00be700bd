//! A tunnel's client side, on the relaying edge: one HTTP/2 stream to the owner on the
//! pooled mTLS connections between edges. Its request body is the proxy's bytes (what
//! the prelude read, then the socket, read as the owner's HTTP/2 layer takes them), its
//! response body the owner's, copied to the proxy's socket by the connection's task.

use super::Origin;
use super::down::CopyDown;
use crate::ads::metrics::RelayFailure;
use crate::ads::ownership::RelayLink;
use crate::ads::relay::{Up, UpSource, open_at_owner, record_relay};
use crate::ads::shared::Shared;
use crate::ads::transport::relay_header::{
    RELAYED_BY, TUNNEL_ORIGIN, TUNNEL_PATH, TUNNEL_PEER_CERTS, TUNNEL_REMOTE, peer_certs_header,
};
use crate::tls::PeerInfo;
use bytes::Bytes;
use http::header::HeaderValue;
use shoal_proto::transport::Member;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf};
use tonic::transport::server::Connected;
use tracing::{debug, info, warn};

/// What a read of the proxy's socket takes at most (on the stack: nothing is kept
/// between reads).
const READ_CHUNK: usize = 16 * 1024;

/// Opens a tunnel of `conn` (of which `replay` was read) to `owner`: `Ok(Some)` is the
/// copy to run for the connection's life, `Ok(None)` a connection closed for its proxy
/// to reconnect. `Err` gives the connection back, untouched but for what was read, when
/// the owner cannot take it: the caller serves it here.
pub(super) async fn tunnel<L>(
    shared: &Arc<Shared>,
    origin: Origin,
    owner: Member,
    proxy_id: &str,
    conn: L,
    replay: Bytes,
) -> Result<Option<CopyDown<L>>, (L, Bytes)>
where
    L: Connected<ConnectInfo = PeerInfo> + AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (Some(placement), Some(tls)) = (shared.placement.get(), shared.relay_tls.get()) else {
        return Err((conn, replay));
    };
    // Refusals come from the stream's own admission, served here: draining, at the limit.
    if *shared.draining.borrow() || shared.refusing.load(Ordering::Acquire) {
        return Err((conn, replay));
    }
    let Ok(permit) = shared.streams.clone().try_acquire_owned() else {
        return Err((conn, replay));
    };
    let per_connection = shared.config.relay_streams_per_connection;
    let (channel, slot) = match shared.relays.channel(&owner.xds_addr, tls, per_connection) {
        Ok(c) => c,
        Err(e) => {
            warn!(owner = %owner.id, addr = %owner.xds_addr, error = %e, "owner address unusable; serving here");
            return Err((conn, replay));
        }
    };
    let link = Arc::new(RelayLink::default());
    let (up, hand_over) = Up::<Socket<L>>::new(replay.clone(), link.clone());
    let req = tunnel_request(&placement.me, origin, &conn.connect_info(), up);
    // The channel goes with the opening: a clone of the pool's, not kept for the tunnel.
    let opened = async move {
        let mut channel = channel;
        open_at_owner(&mut channel, req).await
    };
    let open_timeout = shared.config.relay_open_timeout;
    let body = match tokio::time::timeout(open_timeout, opened).await {
        Ok(Ok(body)) => body,
        Ok(Err(e)) => {
            shared.metrics.relay_failed(RelayFailure::ServedHere);
            debug!(owner = %owner.id, error = %e, "owner cannot take the connection; serving here");
            return Err((conn, replay));
        }
        Err(_) => {
            // Served here, it would only be handed off again, when the fleet can least
            // afford it: the proxy reconnects instead.
            shared.metrics.relay_failed(RelayFailure::OwnerBusy);
            debug!(owner = %owner.id, ?open_timeout, "owner slow to take the connection; closed for the proxy to reconnect");
            return Ok(None);
        }
    };
    // Sent up already; kept only to serve the connection here had the owner refused.
    drop(replay);
    let (read, write) = tokio::io::split(conn);
    let held = record_relay(
        shared,
        proxy_id,
        &owner.id,
        &link,
        (hand_over, Socket(read)),
        permit,
        slot,
    );
    info!(proxy = %proxy_id, owner = %owner.id, "tunneling the connection to its proxy's owner");
    Ok(Some(CopyDown::new(shared.clone(), body, write, link, held)))
}

/// The tunnel's request: its body `up`, the headers naming the relaying edge `me`, the
/// listener the proxy reached and what it presented there (`peer`).
fn tunnel_request<L: AsyncRead + Send + 'static>(
    me: &str,
    origin: Origin,
    peer: &PeerInfo,
    up: Up<Socket<L>>,
) -> http::Request<tonic::body::Body> {
    let mut req = http::Request::new(tonic::body::Body::new(up));
    *req.method_mut() = http::Method::POST;
    *req.uri_mut() = http::Uri::from_static(TUNNEL_PATH);
    let values = [
        (RELAYED_BY, me.to_string()),
        (TUNNEL_ORIGIN, origin.as_str().to_string()),
        (TUNNEL_PEER_CERTS, peer_certs_header(&peer.certificates)),
        (
            TUNNEL_REMOTE,
            peer.remote.map(|r| r.to_string()).unwrap_or_default(),
        ),
    ];
    let headers = req.headers_mut();
    for (name, value) in values {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    req
}

/// A tunnel's source: the proxy's socket, read as the owner's HTTP/2 layer takes it.
struct Socket<L>(ReadHalf<L>);

impl<L: AsyncRead + Send + 'static> UpSource for Socket<L> {
    fn poll_chunk(&mut self, cx: &mut Context<'_>, _: &RelayLink) -> Poll<Option<Bytes>> {
        let mut chunk = [0u8; READ_CHUNK];
        let mut buf = ReadBuf::new(&mut chunk);
        match ready!(Pin::new(&mut self.0).poll_read(cx, &mut buf)) {
            Ok(()) if !buf.filled().is_empty() => {
                Poll::Ready(Some(Bytes::copy_from_slice(buf.filled())))
            }
            // The proxy closed its side (or its socket failed): the owner's connection
            // ends, and with it the response.
            _ => Poll::Ready(None),
        }
    }
}
