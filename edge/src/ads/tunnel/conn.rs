//! The connections a listener's HTTP/2 server takes: a proxy's own (its first bytes,
//! read by the prelude, replayed first), or one tunneled from another edge.

use super::tunnel_io::TunnelIo;
use crate::tls::{PeerConn, PeerInfo};
use bytes::{Buf, Bytes};
use futures::{Stream, StreamExt};
use shoal_infra::coalesced::Coalesced;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::server::Connected;

/// A connection for a listener's server.
// Most connections are direct, and each lives as long as its proxy: the tunneled one is
// boxed, the direct one held inline rather than allocated again.
#[allow(clippy::large_enum_variant)]
pub enum EdgeConn<L> {
    /// Accepted here, its writes gathered ([`Coalesced`]); `replay`: what was read of it
    /// before the server took it.
    Direct {
        io: Coalesced<L>,
        replay: Bytes,
        info: PeerInfo,
    },
    /// Tunneled from the edge it reached, its writes gathered too: each write to a
    /// tunnel is a DATA frame between the edges and a write to the proxy there.
    Tunneled(Box<Coalesced<TunnelIo>>),
}

impl<L: Connected<ConnectInfo = PeerInfo>> EdgeConn<L> {
    /// `io`, nothing read of it yet; its writes gathered up to `coalesce` bytes.
    pub fn direct(io: L, coalesce: usize) -> Self {
        Self::replayed(io, Bytes::new(), coalesce)
    }

    /// `io`, of which `replay` was read; its writes gathered up to `coalesce` bytes.
    pub fn replayed(io: L, replay: Bytes, coalesce: usize) -> Self {
        let info = io.connect_info();
        let io = Coalesced::new(io, coalesce);
        EdgeConn::Direct { io, replay, info }
    }
}

impl<L> EdgeConn<L> {
    /// A connection tunneled here; its writes gathered up to `coalesce` bytes.
    pub fn tunneled(io: Box<TunnelIo>, coalesce: usize) -> Self {
        EdgeConn::Tunneled(Box::new(Coalesced::new(*io, coalesce)))
    }
}

impl<L> Connected for EdgeConn<L> {
    type ConnectInfo = PeerInfo;

    fn connect_info(&self) -> PeerInfo {
        match self {
            EdgeConn::Direct { info, .. } => info.clone(),
            EdgeConn::Tunneled(t) => t.get_ref().info.clone(),
        }
    }
}

impl<L: AsyncRead + Unpin> AsyncRead for EdgeConn<L> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut *self {
            EdgeConn::Direct { io, replay, .. } => {
                if replay.is_empty() {
                    return Pin::new(io).poll_read(cx, buf);
                }
                let n = replay.len().min(buf.remaining());
                buf.put_slice(&replay[..n]);
                replay.advance(n);
                if replay.is_empty() {
                    // Gone with its last byte, not kept for the connection's life.
                    *replay = Bytes::new();
                }
                Poll::Ready(Ok(()))
            }
            EdgeConn::Tunneled(t) => Pin::new(&mut **t).poll_read(cx, buf),
        }
    }
}

impl<L: AsyncWrite + Unpin> AsyncWrite for EdgeConn<L> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut *self {
            EdgeConn::Direct { io, .. } => Pin::new(io).poll_write(cx, buf),
            EdgeConn::Tunneled(t) => Pin::new(&mut **t).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut *self {
            EdgeConn::Direct { io, .. } => Pin::new(io).poll_write_vectored(cx, bufs),
            EdgeConn::Tunneled(t) => Pin::new(&mut **t).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            EdgeConn::Direct { io, .. } => io.is_write_vectored(),
            EdgeConn::Tunneled(t) => t.is_write_vectored(),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut *self {
            EdgeConn::Direct { io, .. } => Pin::new(io).poll_flush(cx),
            EdgeConn::Tunneled(t) => Pin::new(&mut **t).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut *self {
            EdgeConn::Direct { io, .. } => Pin::new(io).poll_shutdown(cx),
            EdgeConn::Tunneled(t) => Pin::new(&mut **t).poll_shutdown(cx),
        }
    }
}

/// A plaintext connection and what is known of its peer (its address).
pub type PlainConn = PeerConn<TcpStream>;

/// The plaintext connections `listener` accepts, with TCP_NODELAY (without it a small
/// push waits behind the previous one's delayed ACK, up to 40 ms on Linux).
pub fn plain_conns(listener: TcpListener) -> impl Stream<Item = io::Result<PlainConn>> {
    TcpListenerStream::new(listener).map(|accepted| {
        let io = accepted?;
        let _ = io.set_nodelay(true);
        let info = PeerInfo {
            remote: io.peer_addr().ok(),
            ..PeerInfo::default()
        };
        Ok(PeerConn::new(io, info))
    })
}
