//! An HTTP/2 connection's writes gathered into fewer, larger ones.
//!
//! h2 writes each frame on its own (a DATA payload is chained to the frame's header, not
//! copied) and flushes after every one. An edge's proxy takes frames of at most 16 KiB: a
//! sync of ~85 KB was ~9 `writev`s, each pushed through TCP by itself and each waking the
//! proxy to read it; a loadtest connection carrying many proxies' streams wrote each
//! request by itself. Here the bytes are copied into a buffer of up to `limit`, and a
//! flush that follows new bytes is answered at once and put off: the connection's task
//! is woken to come back, and the bytes go out at the first flush with nothing written
//! before it (h2 had nothing more to send), when the buffer is full, or after
//! [`MAX_DEFERRED`] flushes put off in a row. The buffer is freed once written, so an
//! idle connection holds none.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Flushes put off in a row before the bytes go out whatever follows, so that a trickle
/// of small writes never waits long.
pub const MAX_DEFERRED: u8 = 8;

/// `io`, its writes gathered up to `limit` bytes (0: written as they come).
pub struct Coalesced<IO> {
    io: IO,
    limit: usize,
    /// Bytes taken and not yet written, from `written` on.
    buf: Vec<u8>,
    written: usize,
    /// Bytes were taken since the last flush.
    wrote: bool,
    /// Flushes put off since the bytes last went out.
    deferred: u8,
}

impl<IO> Coalesced<IO> {
    pub fn new(io: IO, limit: usize) -> Self {
        Coalesced {
            io,
            limit,
            buf: Vec::new(),
            written: 0,
            wrote: false,
            deferred: 0,
        }
    }

    /// The connection below.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    fn pending(&self) -> usize {
        self.buf.len() - self.written
    }
}

impl<IO: AsyncWrite + Unpin> Coalesced<IO> {
    /// Writes what is buffered, then frees the buffer.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.buf.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.buf[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.buf = Vec::new();
        self.written = 0;
        self.deferred = 0;
        Poll::Ready(Ok(()))
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Coalesced<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Coalesced<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.limit == 0 {
            return Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        }
        if this.pending() >= this.limit {
            ready!(this.poll_drain(cx))?;
        }
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if this.pending() == 0 && total >= this.limit {
            // As large as a batch: written as it is, not copied.
            return Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        }
        if this.buf.capacity() == 0 {
            this.buf.reserve_exact(this.limit);
        }
        let mut room = this.limit - this.pending();
        let mut taken = 0;
        for b in bufs {
            let n = b.len().min(room);
            this.buf.extend_from_slice(&b[..n]);
            taken += n;
            room -= n;
            if room == 0 {
                break;
            }
        }
        this.wrote |= taken > 0;
        Poll::Ready(Ok(taken))
    }

    fn is_write_vectored(&self) -> bool {
        self.limit > 0 || self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let pending = this.pending();
        if pending > 0 && this.wrote && pending < this.limit && this.deferred < MAX_DEFERRED {
            // More may follow at once (h2 flushes after each frame): come back before
            // writing.
            this.wrote = false;
            this.deferred += 1;
            cx.waker().wake_by_ref();
            return Poll::Ready(Ok(()));
        }
        this.wrote = false;
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
