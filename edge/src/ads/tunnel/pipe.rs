//! The owner's bytes to a tunnel's response body: what the HTTP/2 server writes to a
//! tunneled connection waits here until the tunnel stream takes it, at most `limit`
//! bytes (the writer waits beyond it).

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// A bounded pipe of bytes: [`PipeWriter`] in, [`PipeBody`] (an HTTP body) out.
pub(super) fn pipe(limit: usize) -> (PipeWriter, PipeBody) {
    let state = Arc::new(Mutex::new(State {
        chunks: VecDeque::new(),
        queued: 0,
        limit: limit.max(1),
        writer_closed: false,
        reader_gone: false,
        reader: None,
        writer: None,
    }));
    (PipeWriter(state.clone()), PipeBody(state))
}

struct State {
    chunks: VecDeque<Bytes>,
    queued: usize,
    limit: usize,
    writer_closed: bool,
    reader_gone: bool,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) struct PipeWriter(Arc<Mutex<State>>);

impl PipeWriter {
    /// Takes as much of `buf` as fits (all of it when the pipe has room at all); `Err`
    /// once the body is gone (the tunnel ended).
    pub fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.poll_write_vectored(cx, &[std::io::IoSlice::new(buf)])
    }

    /// As [`poll_write`](Self::poll_write), all of `bufs` as one chunk.
    pub fn poll_write_vectored(
        &self,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let mut state = lock(&self.0);
        if state.reader_gone {
            return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
        }
        if state.queued >= state.limit {
            state.writer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if len == 0 {
            return Poll::Ready(Ok(0));
        }
        let mut chunk = BytesMut::with_capacity(len);
        for buf in bufs {
            chunk.extend_from_slice(buf);
        }
        state.queued += len;
        state.chunks.push_back(chunk.freeze());
        if let Some(reader) = state.reader.take() {
            reader.wake();
        }
        Poll::Ready(Ok(len))
    }

    /// No more bytes: the body ends once it has passed on what is queued.
    pub fn close(&self) {
        let mut state = lock(&self.0);
        state.writer_closed = true;
        if let Some(reader) = state.reader.take() {
            reader.wake();
        }
    }
}

impl Drop for PipeWriter {
    fn drop(&mut self) {
        self.close();
    }
}

pub(super) struct PipeBody(Arc<Mutex<State>>);

impl Drop for PipeBody {
    fn drop(&mut self) {
        let mut state = lock(&self.0);
        state.reader_gone = true;
        state.chunks.clear();
        if let Some(writer) = state.writer.take() {
            writer.wake();
        }
    }
}

impl Body for PipeBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let mut state = lock(&self.0);
        if let Some(chunk) = state.chunks.pop_front() {
            state.queued -= chunk.len();
            if let Some(writer) = state.writer.take() {
                writer.wake();
            }
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        if state.writer_closed {
            return Poll::Ready(None);
        }
        state.reader = Some(cx.waker().clone());
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        let state = lock(&self.0);
        state.writer_closed && state.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
