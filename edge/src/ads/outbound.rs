//! The response body of an ADS stream: the encoded responses a stream task hands over,
//! a DATA chunk for each of their chunks (bytes shared with other streams are sent as they
//! are), then the gRPC status as trailers.
//!
//! It holds two channel receivers and nothing else: every response is a `Bytes` of exactly
//! its encoded size that leaves the body with the chunk, so a stream keeps no buffer sized
//! by the largest response it ever sent (tonic's encoder does). A chunk counts against the
//! stream's buffer until HTTP/2 has written it ([`queue::Receiver::poll_recv_held`]): what
//! one stream holds on the edge is bounded whether or not its proxy reads.

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use prometheus_client::metrics::gauge::Gauge;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::oneshot;
use tonic::Status;

pub(crate) mod queue;

pub(crate) use queue::{Closed, Receiver, Sender, channel};

/// Responses from a bounded [`channel`], then the closing status: the task's error if it sent
/// one (at once, dropping what is still queued), else OK once the channel is drained.
#[derive(Debug, Default)]
pub struct Outbound {
    rx: Option<Receiver>,
    close: Option<oneshot::Receiver<Status>>,
    /// `shoal_xds_queued_bytes`: the edge's bytes of responses taken and not yet written.
    queued: Gauge,
}

type Polled = Poll<Option<Result<Frame<Bytes>, Infallible>>>;

impl Outbound {
    pub(crate) fn new(rx: Receiver, close: oneshot::Receiver<Status>, queued: Gauge) -> Self {
        Outbound {
            rx: Some(rx),
            close: Some(close),
            queued,
        }
    }

    fn end(&mut self, status: &Status) -> Polled {
        self.rx = None;
        self.close = None;
        Poll::Ready(Some(Ok(Frame::trailers(trailers(status)))))
    }
}

/// `grpc-status` and `grpc-message` (percent-encoded) for `status`.
pub(crate) fn trailers(status: &Status) -> HeaderMap {
    let mut map = HeaderMap::with_capacity(2);
    // Cannot fail: the message is percent-encoded and the details base64-encoded.
    let _ = status.add_header(&mut map);
    map
}

impl Body for Outbound {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled {
        let this = &mut *self;
        let Some(rx) = this.rx.as_mut() else {
            return Poll::Ready(None);
        };
        let msg = rx.poll_recv_held(cx, &this.queued);
        if let Some(close) = self.close.as_mut() {
            match Pin::new(close).poll(cx) {
                Poll::Ready(Ok(status)) => return self.end(&status),
                // Ended without an error: drain what is queued, then end.
                Poll::Ready(Err(_)) => self.close = None,
                Poll::Pending => {}
            }
        }
        match msg {
            Poll::Ready(Some(msg)) => Poll::Ready(Some(Ok(Frame::data(msg)))),
            Poll::Ready(None) => self.end(&Status::ok("")),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rx.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match self.rx {
            Some(_) => SizeHint::default(),
            None => SizeHint::with_exact(0),
        }
    }
}

#[cfg(test)]
impl Outbound {
    /// The next response, decoded (gathered from its chunks), or the closing status
    /// (`None` after OK or at the end).
    pub(crate) async fn next_message<T: prost::Message + Default>(
        &mut self,
    ) -> Option<Result<T, Status>> {
        use http_body_util::BodyExt;
        let mut data: Vec<u8> = Vec::new();
        loop {
            let frame = self.frame().await?.unwrap_or_else(|e| match e {});
            match frame.into_data() {
                Ok(chunk) => {
                    data.extend_from_slice(&chunk);
                    assert_eq!(data[0], 0, "uncompressed");
                    if data.len() < 5 {
                        continue;
                    }
                    let len = u32::from_be_bytes(data[1..5].try_into().unwrap()) as usize;
                    assert!(data.len() <= len + 5, "chunks of one message only");
                    if data.len() == len + 5 {
                        return Some(Ok(T::decode(&data[5..]).unwrap()));
                    }
                }
                Err(frame) => {
                    assert!(data.is_empty(), "the stream ended inside a message");
                    let trailers = frame.into_trailers().unwrap();
                    let status = Status::from_header_map(&trailers).unwrap();
                    return (status.code() != tonic::Code::Ok).then_some(Err(status));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
