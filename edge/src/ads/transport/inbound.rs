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

    fn fail<M>(&mut self, e: FrameError) -> Poll<Option<Result<M, Status>>> {
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

impl<B, T> Inbound<B, T>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    /// The next message's bytes, undecoded (without their prefix).
    fn poll_message(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Status>>> {
        loop {
            if self.body.is_none() {
                return Poll::Ready(None);
            }
            match self.deframer.next(&mut self.chunk) {
                Ok(Some(msg)) => {
                    if self.chunk.is_empty() {
                        // Let go of the chunk's allocation (h2's read buffer) now.
                        self.chunk = Bytes::new();
                    }
                    return Poll::Ready(Some(Ok(msg)));
                }
                Ok(None) => {}
                Err(e) => return self.fail(e),
            }
            let Some(body) = self.body.as_mut() else {
                return Poll::Ready(None);
            };
            match ready!(Pin::new(body).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    // Trailers from a client are meaningless here: skipped.
                    if let Ok(data) = frame.into_data() {
                        self.chunk = data;
                    }
                }
                Some(Err(error)) => {
                    debug!(%error, "request body failed");
                    self.body = None;
                    return Poll::Ready(None);
                }
                None if self.deframer.is_mid_message() => return self.fail(FrameError::Truncated),
                None => {
                    self.body = None;
                    return Poll::Ready(None);
                }
            }
        }
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
        let msg = match ready!(this.poll_message(cx)) {
            Some(Ok(msg)) => msg,
            Some(Err(status)) => return Poll::Ready(Some(Err(status))),
            None => return Poll::Ready(None),
        };
        // Bytes that are not the request message: the client's error.
        Poll::Ready(Some(T::decode(msg).map_err(|e| {
            this.body = None;
            Status::invalid_argument(format!(
                "cannot decode the request as {}: {e}",
                std::any::type_name::<T>().rsplit("::").next().unwrap_or("")
            ))
        })))
    }
}

/// A proxy's requests, a stream of decoded requests, which a relay reads undecoded.
pub(crate) trait RequestStream: Stream + Unpin + Send + 'static {
    /// The next request as the proxy sent it (its gRPC prefix and message), undecoded:
    /// a relay passes it on, and the owner decodes it (a relay decoding and encoding
    /// every request again cost a tenth of the relaying edge's CPU).
    fn poll_framed(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Status>>>;
}

impl<B, T> RequestStream for Inbound<B, T>
where
    B: Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: std::fmt::Display,
    T: prost::Message + Default + 'static,
{
    fn poll_framed(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Status>>> {
        self.poll_message(cx)
            .map(|m| m.map(|r| r.map(|msg| super::encode::reframe(&msg))))
    }
}

/// Requests made in a test, framed as a proxy would.
#[cfg(test)]
impl<T> RequestStream for tokio_stream::wrappers::ReceiverStream<Result<T, Status>>
where
    T: prost::Message + Send + 'static,
{
    fn poll_framed(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Status>>> {
        Pin::new(self)
            .poll_next(cx)
            .map(|m| m.map(|r| r.map(|req| super::encode::frame(&req))))
    }
}

#[cfg(test)]
mod tests;
