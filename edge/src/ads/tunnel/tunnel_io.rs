//! A tunneled connection, as the owner's HTTP/2 server sees it: it reads the proxy's
//! bytes from the tunnel's request body and writes its own into the response's
//! [`pipe`](super::pipe).

use super::pipe::PipeWriter;
use crate::tls::PeerInfo;
use crate::tls::incoming::Closer;
use bytes::{Buf, Bytes};
use futures::task::AtomicWaker;
use http_body::Body;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub struct TunnelIo {
    up: tonic::body::Body,
    closed: Arc<Closed>,
    /// The rest of the last chunk read from `up`.
    chunk: Bytes,
    up_done: bool,
    down: PipeWriter,
    /// The proxy's connection as the relaying edge saw it.
    pub(super) info: PeerInfo,
}

impl TunnelIo {
    pub(super) fn new(
        up: tonic::body::Body,
        down: PipeWriter,
        info: PeerInfo,
        closed: Arc<Closed>,
    ) -> Self {
        TunnelIo {
            up,
            closed,
            chunk: Bytes::new(),
            up_done: false,
            down,
            info,
        }
    }
}

/// Set to close a tunneled connection from above its HTTP/2 layer: the next read fails,
/// the server drops the connection, and the tunnel ends with it.
#[derive(Default)]
pub(super) struct Closed {
    set: AtomicBool,
    waker: AtomicWaker,
}

impl Closed {
    fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// The [`Closer`] of the connection this belongs to.
    pub(super) fn closer(self: &Arc<Self>) -> Closer {
        let closed = self.clone();
        Closer::new(move || {
            closed.set.store(true, Ordering::Release);
            closed.waker.wake();
        })
    }
}

impl AsyncRead for TunnelIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        this.closed.waker.register(cx.waker());
        if this.closed.is_set() {
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        loop {
            if !this.chunk.is_empty() {
                let n = this.chunk.len().min(buf.remaining());
                buf.put_slice(&this.chunk[..n]);
                this.chunk.advance(n);
                return Poll::Ready(Ok(()));
            }
            if this.up_done {
                return Poll::Ready(Ok(()));
            }
            match ready!(Pin::new(&mut this.up).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        this.chunk = data;
                    }
                }
                Some(Err(e)) => return Poll::Ready(Err(io::Error::other(e))),
                None => this.up_done = true,
            }
        }
    }
}

impl AsyncWrite for TunnelIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.down.poll_write(cx, buf)
    }

    /// One chunk for all of `bufs`: h2 writes a frame's head and its payload as two
    /// slices, which would otherwise be two DATA frames on the tunnel and two writes to the
    /// proxy's socket.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.down.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.down.close();
        Poll::Ready(Ok(()))
    }
}
