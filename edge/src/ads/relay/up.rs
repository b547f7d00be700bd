//! The proxy's side of a relay or tunnel, sent up to the owner: chunks from a source
//! ([`UpSource`]: the proxy's requests, or its connection's bytes) written to the request
//! stream as the owner's window takes them, one chunk at a time.

use crate::ads::ownership::RelayLink;
use bytes::Bytes;
use h2::SendStream;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

/// What a relay sends up to the owner after its first chunk.
pub(crate) trait UpSource: Unpin + Send + 'static {
    /// The next chunk; `None` ends the request to the owner. A source that ends for the
    /// proxy's fault says why through `link` ([`RelayLink::fail`]).
    fn poll_chunk(&mut self, cx: &mut Context<'_>, link: &RelayLink) -> Poll<Option<Bytes>>;
}

/// Sends `source` up until it ends, the relay ends here, or the owner's stream goes away;
/// then ends the request (a stream the owner reset is left as it is).
pub(crate) struct SendUp<T> {
    source: T,
    send: SendStream<Bytes>,
    link: Arc<RelayLink>,
}

impl<T> SendUp<T> {
    pub(crate) fn new(source: T, send: SendStream<Bytes>, link: Arc<RelayLink>) -> Self {
        SendUp { source, send, link }
    }

    fn end(&mut self) -> Poll<()> {
        let _ = self.send.send_data(Bytes::new(), true);
        Poll::Ready(())
    }
}

impl<T: UpSource> Future for SendUp<T> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.link.up.register(cx.waker());
        loop {
            if this.link.ended() {
                return this.end();
            }
            // A chunk is read only once the window has room: what waits here for the owner
            // is one chunk at most (h2 buffers what is sent beyond the window).
            this.send.reserve_capacity(1);
            if this.send.capacity() == 0 {
                match ready!(this.send.poll_capacity(cx)) {
                    Some(Ok(0)) => continue,
                    Some(Ok(_)) => {}
                    // The owner's stream is gone: the response says why, downstream.
                    Some(Err(_)) | None => return Poll::Ready(()),
                }
            }
            match ready!(this.source.poll_chunk(cx, &this.link)) {
                Some(chunk) => {
                    if this.send.send_data(chunk, false).is_err() {
                        return Poll::Ready(());
                    }
                }
                None => return this.end(),
            }
        }
    }
}
