//! A tunnel's client side, on the relaying edge: one HTTP/2 stream to the owner on the
//! pooled mTLS connections between edges. Its request body is the proxy's bytes (what
//! the prelude read, then the socket, read as the owner's window takes them), its
//! response body the owner's, copied to the proxy's socket; both by the connection's
//! task ([`TunnelCopy`]).

use super::Origin;
use super::copy::TunnelCopy;
use crate::ads::ownership::RelayLink;
use crate::ads::relay::{NotTaken, open_at_owner, record_relay};
use crate::ads::shared::Shared;
use crate::ads::transport::relay_header::{
    RELAYED_BY, TUNNEL_ORIGIN, TUNNEL_PATH, TUNNEL_PEER_CERTS, TUNNEL_REMOTE, peer_certs_header,
};
use crate::tls::PeerInfo;
use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue};
use shoal_proto::transport::Member;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::io::{AsyncRead, AsyncWrite};
use tonic::transport::server::Connected;
use tracing::info;

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
) -> Result<Option<TunnelCopy<L>>, (L, Bytes)>
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
    let headers = tunnel_headers(&placement.me, origin, &conn.connect_info());
    let opened = open_at_owner(shared, tls, &owner, TUNNEL_PATH, headers, replay.clone()).await;
    let (body, send, slot) = match opened {
        Ok(taken) => taken,
        Err(NotTaken::Refused) => return Err((conn, replay)),
        Err(NotTaken::Slow) => return Ok(None),
    };
    // Sent up already; kept only to serve the connection here had the owner refused.
    drop(replay);
    let link = Arc::new(RelayLink::default());
    let held = record_relay(shared, proxy_id, &owner.id, &link, permit, slot);
    info!(proxy = %proxy_id, owner = %owner.id, "tunneling the connection to its proxy's owner");
    let halves = tokio::io::split(conn);
    Ok(Some(TunnelCopy::new(
        shared.clone(),
        body,
        halves,
        send,
        link,
        held,
    )))
}

/// The tunnel's headers: the relaying edge `me`, the listener the proxy reached and what
/// it presented there (`peer`).
fn tunnel_headers(me: &str, origin: Origin, peer: &PeerInfo) -> HeaderMap {
    let values = [
        (RELAYED_BY, me.to_string()),
        (TUNNEL_ORIGIN, origin.as_str().to_string()),
        (TUNNEL_PEER_CERTS, peer_certs_header(&peer.certificates)),
        (
            TUNNEL_REMOTE,
            peer.remote.map(|r| r.to_string()).unwrap_or_default(),
        ),
    ];
    let mut headers = HeaderMap::with_capacity(values.len());
    for (name, value) in values {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    headers
}
