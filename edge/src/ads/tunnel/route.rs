//! The relaying edge's side: every connection a listener accepts is routed here first.
//! The prelude reads the first stream's node ID; the connection is then served here (its
//! bytes replayed to this listener's server) or tunneled to the proxy's owner.

use super::Origin;
use super::conn::EdgeConn;
use super::copy::TunnelCopy;
use super::inbox::Inbox;
use super::open;
use crate::ads::shared::Shared;
use crate::ads::transport::prelude::{EMPTY_SETTINGS, Prelude, Progress, Verdict};
use crate::tls::PeerInfo;
use futures::future::OptionFuture;
use futures::{FutureExt, Stream, StreamExt};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;
use tracing::debug;

/// The connections for the server of the listener `origin` accepting `conns`: each
/// routed in a task of its own (served here or tunneled), and the connections other edges
/// tunnel to this listener. Stops accepting once the returned stream is dropped.
pub(crate) fn incoming<L, S>(
    shared: Arc<Shared>,
    origin: Origin,
    conns: S,
) -> impl Stream<Item = io::Result<EdgeConn<L>>> + Send + 'static
where
    L: Connected<ConnectInfo = PeerInfo> + AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Stream<Item = io::Result<L>> + Send + 'static,
{
    let capacity = shared.config.accept_queue.max(1);
    let (direct_tx, direct_rx) = mpsc::channel(capacity);
    let (tunneled_tx, tunneled_rx) = mpsc::channel(capacity);
    let inbox: Inbox = Arc::new(move |io| tunneled_tx.try_send(io).map_err(|e| e.into_inner()));
    shared.tunnels.set(origin, inbox);
    let coalesce = shared.config.write_coalesce_bytes;
    tokio::spawn(accept(shared, origin, conns, direct_tx));
    let tunneled =
        ReceiverStream::new(tunneled_rx).map(move |io| Ok(EdgeConn::tunneled(io, coalesce)));
    futures::stream::select(ReceiverStream::new(direct_rx), tunneled)
}

async fn accept<L, S>(
    shared: Arc<Shared>,
    origin: Origin,
    conns: S,
    tx: mpsc::Sender<io::Result<EdgeConn<L>>>,
) where
    L: Connected<ConnectInfo = PeerInfo> + AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Stream<Item = io::Result<L>> + Send + 'static,
{
    let mut conns = std::pin::pin!(conns);
    loop {
        let next = tokio::select! {
            _ = tx.closed() => return,
            next = conns.next() => next,
        };
        match next {
            None => return,
            Some(Err(e)) => {
                // Out of file descriptors and the like: wait a moment, keep serving.
                debug!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Some(Ok(conn)) => {
                // Boxed, and made outside the task's future, which then holds only the
                // copy of a tunnel: a future is as large as its largest step and stays so
                // for the task's life, a tunnel's (before: 2.1 KiB of a plaintext
                // connection's task, 9 KiB of a TLS one's).
                let routing = Box::pin(route_or_serve(shared.clone(), origin, conn, tx.clone()));
                tokio::spawn(routing.then(OptionFuture::from));
            }
        }
    }
}

/// Routes `conn`: to this listener's server through `tx`, or to its proxy's owner, whose
/// tunnel's copy is returned to run.
async fn route_or_serve<L>(
    shared: Arc<Shared>,
    origin: Origin,
    conn: L,
    tx: mpsc::Sender<io::Result<EdgeConn<L>>>,
) -> Option<TunnelCopy<L>>
where
    L: Connected<ConnectInfo = PeerInfo> + AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    match route(shared, origin, conn).await {
        Routed::Here(conn) => {
            let _ = tx.send(Ok(conn)).await;
            None
        }
        Routed::Tunneled(copy) => Some(copy),
        Routed::Closed => None,
    }
}

/// Where a connection goes.
enum Routed<L> {
    /// To this listener's server.
    Here(EdgeConn<L>),
    /// Tunneled to its proxy's owner: the copy, to run for the connection's life.
    Tunneled(TunnelCopy<L>),
    Closed,
}

/// Serves `conn` here or tunnels it to its proxy's owner.
async fn route<L>(shared: Arc<Shared>, origin: Origin, mut conn: L) -> Routed<L>
where
    L: Connected<ConnectInfo = PeerInfo> + AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let coalesce = shared.config.write_coalesce_bytes;
    if !tunnels_out(&shared, &conn.connect_info()) {
        return Routed::Here(EdgeConn::direct(conn, coalesce));
    }
    let mut prelude = Prelude::new(shared.config.relay_prelude_bytes);
    let wait = shared.config.first_request_timeout;
    match tokio::time::timeout(wait, read_prelude(&mut conn, &mut prelude)).await {
        Ok(Ok(None)) => {}
        // What the prelude cannot follow, HTTP/2 may still take: served here when the
        // replay is whole (our SETTINGS acknowledged), closed otherwise.
        Ok(Ok(Some(why))) if prelude.acked() => {
            debug!(%why, "connection not readable before HTTP/2; served here");
            return Routed::Here(EdgeConn::replayed(conn, prelude.into_replay(), coalesce));
        }
        Ok(Ok(Some(why))) => {
            debug!(%why, "not an HTTP/2 connection; closed");
            return Routed::Closed;
        }
        Ok(Err(e)) => {
            debug!(error = %e, "connection ended before its first request");
            return Routed::Closed;
        }
        Err(_) if prelude.acked() => {
            debug!(?wait, "no first request in time; served here");
            return Routed::Here(EdgeConn::replayed(conn, prelude.into_replay(), coalesce));
        }
        Err(_) => {
            debug!(?wait, "connection never acknowledged our settings; closed");
            return Routed::Closed;
        }
    }
    let proxy_id = match prelude.verdict() {
        Some(Verdict::Ads { node_id, .. }) => node_id.clone(),
        Some(Verdict::Other { why }) => {
            debug!(%why, "first stream not an ADS stream of a proxy; served here");
            return Routed::Here(EdgeConn::replayed(conn, prelude.into_replay(), coalesce));
        }
        None => return Routed::Here(EdgeConn::replayed(conn, prelude.into_replay(), coalesce)),
    };
    let replay = prelude.into_replay();
    let owner = match shared.placement.get() {
        Some(placement) => placement.owner_elsewhere(&proxy_id).await,
        None => Ok(None),
    };
    let owner = match owner {
        Ok(Some(owner)) => owner,
        // Ours, or no ring yet: the stream's own admission decides (and waits or refuses).
        Ok(None) | Err(_) => return Routed::Here(EdgeConn::replayed(conn, replay, coalesce)),
    };
    match open::tunnel(&shared, origin, owner, &proxy_id, conn, replay).await {
        Ok(Some(copy)) => Routed::Tunneled(copy),
        Ok(None) => Routed::Closed,
        Err((conn, replay)) => Routed::Here(EdgeConn::replayed(conn, replay, coalesce)),
    }
}

/// Whether connections of `peer` are read for a tunnel: when this edge relays at all,
/// has peers to relay to, and `peer` is a proxy (another edge's connections carry relays
/// and tunnels to this one).
fn tunnels_out(shared: &Shared, peer: &PeerInfo) -> bool {
    let (Some(placement), Some(_)) = (shared.placement.get(), shared.relay_tls.get()) else {
        return false;
    };
    shared.config.relay_connections
        && peer.spiffe.as_ref() != Some(&shared.config.edge_identity)
        && placement.ring.borrow().members().len() != 1
}

/// Writes our empty SETTINGS and reads until the prelude is ready: `Some(why)` when it
/// cannot follow the connection.
async fn read_prelude<L>(conn: &mut L, prelude: &mut Prelude) -> io::Result<Option<String>>
where
    L: AsyncRead + AsyncWrite + Unpin,
{
    conn.write_all(&EMPTY_SETTINGS).await?;
    conn.flush().await?;
    loop {
        if conn.read_buf(prelude.buffer_mut()).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        match prelude.advance() {
            Progress::NeedMore => continue,
            Progress::Ready => return Ok(None),
            Progress::Invalid(why) => return Ok(Some(why)),
        }
    }
}
