//! Ownership by relay: a stream that reaches an edge that does not own its proxy (the
//! Service picked an edge at random) is relayed, bytes only, to the owner, which
//! generates and pushes its config. The relaying edge decodes nothing of the responses;
//! it re-frames the proxy's requests (they are small) and copies the owner's response
//! frames and final status back.
//!
//! ```text
//!  proxy ──► edge A (not owner) ──mTLS, x-shoal-relayed-by: A,──► edge B (owner) ─ generates
//!                                  x-shoal-relayed-identity
//!        ◄──────── response frames, copied ◄────────────────────┘
//! ```
//!
//! Relays run over mTLS between edges: the relaying edge presents its own certificate
//! (the edge SPIFFE ID) and the proxy's identity in [`RELAYED_IDENTITY`]; the owner takes
//! those headers only from a peer whose verified certificate names the edge identity.
//!
//! A relayed stream is served by whoever receives it (no second hop, whatever that edge's
//! ring says), and an owner that cannot be reached or refuses the stream (draining) is
//! not waited for: the edge serves the proxy itself. On a ring change or a drain the
//! relay ends with a retryable status, and the proxy reconnects, through the Service, to
//! be relayed to its new owner.

use super::error::{AdsError, Ending};
use super::outbound::Outbound;
use super::protocol::Protocol;
use super::shared::Shared;
use super::transport::frame;
use super::transport::relay_header::{RELAYED_BY, RELAYED_IDENTITY, identity_header};
use crate::proxy::Proxy;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use http::header::{CONTENT_TYPE, HeaderValue, TE};
use http_body::{Body as _, Frame};
use shoal_proto::transport::Member;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot, watch};
use tonic::Status;
use tonic::codegen::Service;
use tracing::{Instrument, debug, info, warn};

/// How long a relay waits for the owner to take the stream (its response headers) before
/// serving the proxy here. An owner that is down refuses at once (or within the 1 s
/// connect timeout); one busy with a connection storm can take seconds, and serving its
/// proxies here instead only moves them again at the next re-home: measured at 1,500
/// proxies opening at once, 2 s left ~20% of them away from their owner.
const RELAY_OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// A request body fed from a channel of gRPC frames.
struct Frames(mpsc::Receiver<Bytes>);

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        self.0.poll_recv(cx).map(|m| m.map(|b| Ok(Frame::data(b))))
    }
}

/// A stream given back to be served here: its first request, the rest, and its place
/// under `--max-streams`.
pub(crate) type Back<M, S> = (<M as Protocol>::Request, S, OwnedSemaphorePermit);

/// Relays the stream to `owner`; the relay holds `permit` (its place under
/// `--max-streams`) while it lasts. `Err` gives the stream back, untouched but for its
/// first request, when the owner cannot take it: the caller serves it itself.
pub(crate) async fn relay<M, S>(
    shared: &Arc<Shared>,
    owner: Member,
    proxy: &Proxy,
    first: M::Request,
    inbound: S,
    permit: OwnedSemaphorePermit,
) -> Result<Outbound, Back<M, S>>
where
    M: Protocol,
    S: Stream<Item = Result<M::Request, Status>> + Unpin + Send + 'static,
{
    let (Some(placement), Some(tls)) = (shared.placement.get(), shared.relay_tls.get()) else {
        debug!(owner = %owner.id, "no TLS to relay with; serving here");
        return Err((first, inbound, permit));
    };
    let proxy_id = proxy.id.as_str();
    let mut channel = match shared.relays.channel(&owner.xds_addr, tls) {
        Ok(c) => c,
        Err(e) => {
            warn!(owner = %owner.id, addr = %owner.xds_addr, error = %e, "owner address unusable; serving here");
            return Err((first, inbound, permit));
        }
    };
    let (tx, rx) = mpsc::channel::<Bytes>(shared.config.stream_buffer.max(1));
    let _ = tx.try_send(frame(&first));
    let mut req = http::Request::new(tonic::body::Body::new(Frames(rx)));
    *req.method_mut() = http::Method::POST;
    *req.uri_mut() = http::Uri::from_static(M::PATH);
    let headers = req.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(TE, HeaderValue::from_static("trailers"));
    if let Ok(me) = HeaderValue::from_str(&placement.me) {
        headers.insert(RELAYED_BY, me);
    }
    if let Ok(identity) = HeaderValue::from_str(&identity_header(&proxy.identity)) {
        headers.insert(RELAYED_IDENTITY, identity);
    }
    let opened = async {
        std::future::poll_fn(|cx| channel.poll_ready(cx))
            .await
            .map_err(|e| e.to_string())?;
        let resp = channel.call(req).await.map_err(|e| e.to_string())?;
        if resp.status() != http::StatusCode::OK {
            return Err(format!("HTTP {}", resp.status()));
        }
        // A refusal is a trailers-only response: grpc-status in the headers.
        if let Some(code) = resp.headers().get("grpc-status") {
            return Err(format!("refused with grpc-status {code:?}"));
        }
        Ok(resp.into_body())
    };
    let body = match tokio::time::timeout(RELAY_OPEN_TIMEOUT, opened).await {
        Ok(Ok(body)) => body,
        Ok(Err(e)) => {
            debug!(owner = %owner.id, error = %e, "owner cannot take the stream; serving here");
            return Err((first, inbound, permit));
        }
        Err(_) => {
            debug!(owner = %owner.id, "owner slow to take the stream; serving here");
            return Err((first, inbound, permit));
        }
    };
    let (out_tx, out_rx) = mpsc::channel(shared.config.stream_buffer.max(1));
    let (close_tx, close_rx) = oneshot::channel();
    let (id, closed) = shared.relays.insert(proxy_id, &owner.id);
    // One session per proxy ID: a stream of the same proxy served here ends.
    if let Some(served) = shared.registry.proxy(proxy_id) {
        served.end(Ending::Replaced);
    }
    // A drain that began while the owner was taking the stream: end_all ran before the
    // insert, so the relay ends here.
    if *shared.draining.borrow() || shared.refusing.load(Ordering::Acquire) {
        shared.relays.end(proxy_id, Ending::Draining);
    }
    shared.metrics.relayed.inc();
    let span =
        tracing::info_span!("relay", protocol = M::NAME, proxy = %proxy_id, owner = %owner.id);
    let task = pump::<M, S>(inbound, tx, body, out_tx, close_tx, closed);
    let shared = shared.clone();
    tokio::spawn(
        async move {
            info!("relaying to the proxy's owner");
            task.await;
            drop(permit);
            shared.relays.remove(id);
            shared.metrics.relayed.dec();
        }
        .instrument(span),
    );
    Ok(Outbound::new(out_rx, close_rx))
}

/// Copies requests up and responses down until either side ends or the relay is closed.
async fn pump<M, S>(
    mut inbound: S,
    up: mpsc::Sender<Bytes>,
    mut body: tonic::body::Body,
    down: mpsc::Sender<Bytes>,
    close: oneshot::Sender<Status>,
    mut closed: watch::Receiver<Option<Ending>>,
) where
    M: Protocol,
    S: Stream<Item = Result<M::Request, Status>> + Unpin + Send,
{
    let status = loop {
        tokio::select! {
            why = async { closed.wait_for(Option::is_some).await.ok().and_then(|w| *w) } => {
                let why = why.unwrap_or(Ending::HandedOff);
                break Some(AdsError::from(why).to_status());
            }
            req = inbound.next() => match req {
                Some(Ok(req)) => {
                    if up.send(frame(&req)).await.is_err() {
                        break Some(Status::unavailable("the owner ended the relayed stream; reconnect"));
                    }
                }
                Some(Err(status)) => break Some(status),
                None => break None,
            },
            frame = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)) => match frame {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        if down.send(data).await.is_err() {
                            break None;
                        }
                    }
                    Err(frame) => break Some(trailer_status(frame.trailers_ref())),
                },
                Some(Err(status)) => {
                    break Some(Status::unavailable(format!(
                        "the proxy's owner went away ({}); reconnect",
                        status.message()
                    )));
                }
                None => break Some(Status::unavailable("the owner ended the stream; reconnect")),
            },
        }
    };
    if let Some(status) = status {
        let _ = close.send(status);
    }
}

/// The gRPC status in an upstream's trailers.
fn trailer_status(trailers: Option<&http::HeaderMap>) -> Status {
    let Some(trailers) = trailers else {
        return Status::unavailable("the owner ended the stream; reconnect");
    };
    let code = trailers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(tonic::Code::Unavailable as i32);
    let message = trailers
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    Status::new(tonic::Code::from_i32(code), message)
}

#[cfg(test)]
mod tests;
