//! The proxy's requests: an HTTP/2 request body read as a stream of decoded messages.

use super::framing::{Deframer, FrameError};
use bytes::Bytes;
use futures::Stream;
use http_body::Body;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tonic::Status;
use tracing::debug;

/// Decoded requests from `B`. A message is decoded from the DATA chunk that holds it,
/// which is released as soon as its last message is out. The stream yields `Err` for a
/// request this server refuses (compressed, too large, undecodable) and then ends; it ends
/// quietly when the proxy half-closes or the body fails (the proxy went away).
pub(crate) struct Inbound<B, T> {
    body: Option<B>,
    deframer: Deframer,
    /// The rest of the current DATA chunk.
    chunk: Bytes,
    _message: PhantomData<fn() -> T>,
}

impl<B, T> Inbound<B, T> {
    pub(crate) fn new(body: B, max_message: usize) -> Self {
        Inbound {
            body: Some(body),
            deframer: Deframer::new(max_message),
            chunk: Bytes::new(),
            _message: PhantomData,
        }
    }

    fn fail(&mut self, e: FrameError) -> Poll<Option<Result<T, Status>>> {
        self.body = None;
        self.chunk = Bytes::new();
        Poll::Ready(Some(Err(e.to_status())))
    }

    /// Bytes this stream holds between messages (none once a message is out).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn held(&self) -> usize {
        self.chunk.len() + self.deframer.held()
    }
}

impl<B, T> Stream for Inbound<B, T>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
    T: prost::Message + Default,
{
    type Item = Result<T, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.body.is_none() {
                return Poll::Ready(None);
            }
            match this.deframer.next(&mut this.chunk) {
                Ok(Some(msg)) => {
                    if this.chunk.is_empty() {
                        // Let go of the chunk's allocation (h2's read buffer) now.
                        this.chunk = Bytes::new();
                    }
                    // Bytes that are not the request message: the client's error.
                    return Poll::Ready(Some(T::decode(msg).map_err(|e| {
                        this.body = None;
                        Status::invalid_argument(format!(
                            "cannot decode the request as {}: {e}",
                            std::any::type_name::<T>().rsplit("::").next().unwrap_or("")
                        ))
                    })));
                }
                Ok(None) => {}
                Err(e) => return this.fail(e),
            }
            let Some(body) = this.body.as_mut() else {
                return Poll::Ready(None);
            };
            match ready!(Pin::new(body).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    // Trailers from a client are meaningless here: skipped.
                    if let Ok(data) = frame.into_data() {
                        this.chunk = data;
                    }
                }
                Some(Err(error)) => {
                    debug!(%error, "request body failed");
                    this.body = None;
                    return Poll::Ready(None);
                }
                None if this.deframer.is_mid_message() => return this.fail(FrameError::Truncated),
                None => {
                    this.body = None;
                    return Poll::Ready(None);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
