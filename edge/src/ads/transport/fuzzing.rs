//! The request path below tonic, without I/O, for the `cargo fuzz` targets in `fuzz/`
//! (feature `fuzzing`, never on in a build that serves): HTTP/2 DATA chunks through the
//! gRPC deframer and prost decoding, exactly as a stream task reads them.

use super::inbound::Inbound;
use bytes::Bytes;
use futures::Stream;
use http_body::{Body, Frame};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use tonic::Status;

/// A request body whose DATA chunks are all there.
struct Chunks(VecDeque<Bytes>);

impl Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(|c| Ok(Frame::data(c))))
    }
}

/// Every request (or refusal) the stream would read from `chunks`, with at most
/// `max_message` bytes a request. Checks on the way that the stream never holds more than
/// the chunk it reads plus one request, the bound the transport promises per stream.
pub fn decode_requests<T: prost::Message + Default>(
    chunks: impl IntoIterator<Item = Bytes>,
    max_message: usize,
) -> Vec<Result<T, Status>> {
    let chunks: VecDeque<Bytes> = chunks.into_iter().collect();
    let largest = chunks.iter().map(Bytes::len).max().unwrap_or(0);
    let mut inbound = Inbound::<_, T>::new(Chunks(chunks), max_message);
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    while let Poll::Ready(Some(r)) = Pin::new(&mut inbound).poll_next(&mut cx) {
        let held = inbound.held();
        assert!(
            held <= largest + max_message,
            "a stream holds {held} bytes between requests (largest chunk {largest}, \
             limit {max_message})"
        );
        out.push(r);
    }
    out
}
