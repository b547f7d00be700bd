//! A tunneled connection, as the owner's HTTP/2 server sees it: it reads the proxy's
//! bytes from the tunnel's request body and writes its own into the response's
//! [`pipe`](super::pipe).

use super::pipe::PipeWriter;
use crate::tls::PeerInfo;
use bytes::{Buf, Bytes};
use http_body::Body;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub struct TunnelIo {
    up: tonic::body::Body,
    /// The rest of the last chunk read from `up`.
    chunk: Bytes,
    up_done: bool,
    down: PipeWriter,
    /// The proxy's connection as the relaying edge saw it.
    pub(super) info: PeerInfo,
}

impl TunnelIo {
    pub(super) fn new(up: tonic::body::Body, down: PipeWriter, info: PeerInfo) -> Self {
        TunnelIo {
            up,
            chunk: Bytes::new(),
            up_done: false,
            down,
            info,
        }
    }
}

impl AsyncRead for TunnelIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
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
