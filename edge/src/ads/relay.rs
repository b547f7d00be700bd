//! Ownership by relay: a stream that reaches an edge that does not own its proxy (the
//! Service picked an edge at random) is relayed, bytes only, to the owner, which
//! generates and pushes its config. The relaying edge decodes nothing past the first
//! request: it passes the proxy's later requests on as they were framed, and the owner's
//! response frames and trailers back.
//!
//! ```text
//!  proxy ──► edge A (not owner) ──mTLS, x-shoal-relayed-by: A,──► edge B (owner) ─ generates
//!                                  x-shoal-relayed-identity
//!        ◄──────── response frames, passed through ◄────────────┘
//! ```
//!
//! A relay keeps no channel or buffer of its own: the proxy's requests are sent up by a
//! small task ([`SendUp`], each request as it is read, as the owner's window takes it),
//! and the owner's response body is the proxy's ([`Relayed`], frames passed on as they
//! arrive, within the HTTP/2 stream window). The stream to the owner is one of the
//! pooled connections between edges, on h2 directly ([`PeerConnection`]). What a relay
//! keeps besides its two HTTP/2 streams is a [`RelayLink`]: why it ends, and the two
//! wakers to tell.
//!
//! [`PeerConnection`]: super::transport::peer::PeerConnection
//!
//! Relays run over mTLS between edges: the relaying edge presents its own certificate
//! (the edge SPIFFE ID) and the proxy's identity in [`RELAYED_IDENTITY`]; the owner takes
//! those headers only from a peer whose verified certificate names the edge identity.
//!
//! A relayed stream is served by whoever receives it (no second hop, whatever that edge's
//! ring says), and an owner that cannot be reached or refuses the stream (draining, at its
//! limit) is not waited for: the edge serves the proxy itself. An owner that is reachable
//! but slow (a connection storm) is waited for, then the proxy is told to come back: a
//! proxy served here would only be handed off again, doing its generation twice when the
//! fleet can least afford it. On a ring change or a drain the relay ends with a retryable
//! status, and the proxy reconnects, through the Service, to be relayed to its new owner.

use super::error::Ending;
use super::metrics::RelayFailure;
use super::ownership::{ConnectionSlot, RelayLink};
use super::protocol::Protocol;
use super::shared::Shared;
use super::transport::relay_header::{RELAYED_BY, RELAYED_IDENTITY, identity_header};
use super::transport::{RequestStream, frame};
use crate::proxy::Proxy;
use crate::tls::client::RelayConnector;
use bytes::Bytes;
use futures::Stream;
use h2::{RecvStream, SendStream};
use http::header::{CONTENT_TYPE, HeaderMap, HeaderValue, TE};
use http_body::{Body, Frame, SizeHint};
use shoal_proto::transport::Member;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};
use tokio::sync::OwnedSemaphorePermit;
use tonic::Status;
use tracing::{debug, info, warn};

mod up;

pub(crate) use up::{SendUp, UpSource};

/// A stream given back to be served here: its first request, the rest, and its place
/// under `--max-streams`.
pub(crate) type Back<M, S> = (<M as Protocol>::Request, S, OwnedSemaphorePermit);

/// Why a stream was not relayed.
pub(crate) enum Unrelayed<M: Protocol, S> {
    /// The owner cannot take it (unreachable, refusing): serve it here.
    ServeHere(Back<M, S>),
    /// The owner did not take it within `--relay-open-timeout`: the proxy reconnects.
    OwnerBusy(Status),
}

/// Relays the stream to `owner`; the relay holds `permit` (its place under
/// `--max-streams`) while it lasts. [`Unrelayed::ServeHere`] gives the stream back,
/// untouched but for its first request, when the owner cannot take it: the caller serves
/// it itself.
pub(crate) async fn relay<M, S>(
    shared: &Arc<Shared>,
    owner: Member,
    proxy: &Proxy,
    first: M::Request,
    inbound: S,
    permit: OwnedSemaphorePermit,
) -> Result<Relayed, Unrelayed<M, S>>
where
    M: Protocol,
    S: RequestStream + Stream<Item = Result<M::Request, Status>>,
{
    let (Some(placement), Some(tls)) = (shared.placement.get(), shared.relay_tls.get()) else {
        debug!(owner = %owner.id, "no TLS to relay with; serving here");
        return Err(Unrelayed::ServeHere((first, inbound, permit)));
    };
    let proxy_id = proxy.id.as_str();
    // Only the first request goes up until the owner takes the stream: until then the
    // stream stays here, to be served if the owner does not.
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(TE, HeaderValue::from_static("trailers"));
    if let Ok(me) = HeaderValue::from_str(&placement.me) {
        headers.insert(RELAYED_BY, me);
    }
    if let Ok(identity) = HeaderValue::from_str(&identity_header(&proxy.identity)) {
        headers.insert(RELAYED_IDENTITY, identity);
    }
    let opened = open_at_owner(shared, tls, &owner, M::PATH, headers, frame(&first)).await;
    let (body, send, slot) = match opened {
        Ok(taken) => taken,
        Err(NotTaken::Refused) => return Err(Unrelayed::ServeHere((first, inbound, permit))),
        Err(NotTaken::Slow) => {
            return Err(Unrelayed::OwnerBusy(Status::unavailable(format!(
                "the proxy's owner ({}) did not take the stream within {:?}; reconnect",
                owner.id, shared.config.relay_open_timeout
            ))));
        }
    };
    let link = Arc::new(RelayLink::default());
    let held = record_relay(shared, proxy_id, &owner.id, &link, permit, slot);
    // The proxy's requests, piped up in a task of their own: the owner's responses go
    // down in the proxy's response body, which hyper polls only as the proxy reads.
    tokio::spawn(SendUp::new(Requests(inbound), send, link.clone()));
    info!(protocol = M::NAME, proxy = %proxy_id, owner = %owner.id, "relaying to the proxy's owner");
    Ok(Relayed {
        body,
        link,
        body_ended: false,
        done: false,
        held,
    })
}

/// Why an owner did not take a relay or tunnel.
pub(crate) enum NotTaken {
    /// Unreachable, its address unusable, or refusing (draining, at its limit): the
    /// proxy is served here.
    Refused,
    /// Live, but it did not take it within `--relay-open-timeout`: the proxy reconnects
    /// (served here, it would only be handed off again, when the fleet can least afford
    /// it).
    Slow,
}

/// What an owner took: its response, the rest of the request to it, and the relay's
/// place on the connection.
pub(crate) type Taken = (RecvStream, SendStream<Bytes>, ConnectionSlot);

/// Opens a relay or tunnel at `owner` (a POST to `path` with `headers`, its body begun
/// with `first`) on the pooled connections to it, within `--relay-open-timeout`; a
/// failure is counted and logged by why.
pub(crate) async fn open_at_owner(
    shared: &Shared,
    tls: &RelayConnector,
    owner: &Member,
    path: &'static str,
    headers: HeaderMap,
    first: Bytes,
) -> Result<Taken, NotTaken> {
    let per_connection = shared.config.relay_streams_per_connection;
    let (peer, slot) = match shared
        .relays
        .connection(&owner.xds_addr, tls, per_connection)
    {
        Ok(c) => c,
        Err(e) => {
            warn!(owner = %owner.id, addr = %owner.xds_addr, error = %e, "owner address unusable; serving here");
            return Err(NotTaken::Refused);
        }
    };
    let open_timeout = shared.config.relay_open_timeout;
    match tokio::time::timeout(open_timeout, peer.open(path, headers, first)).await {
        Ok(Ok((body, send))) => Ok((body, send, slot)),
        Ok(Err(e)) => {
            shared.metrics.relay_failed(RelayFailure::ServedHere);
            debug!(owner = %owner.id, path, error = %e, "owner cannot take the relay; serving here");
            Err(NotTaken::Refused)
        }
        Err(_) => {
            shared.metrics.relay_failed(RelayFailure::OwnerBusy);
            debug!(owner = %owner.id, path, ?open_timeout, "owner slow to take the relay; the proxy reconnects");
            Err(NotTaken::Slow)
        }
    }
}

/// Records a relay (or tunnel) of `proxy_id` the owner took: one session per proxy ID
/// (a stream of it served here ends), ended at once if a drain began meanwhile. What it
/// holds is given back when the returned [`Held`] drops.
pub(crate) fn record_relay(
    shared: &Arc<Shared>,
    proxy_id: &str,
    owner_id: &str,
    link: &Arc<RelayLink>,
    permit: OwnedSemaphorePermit,
    slot: ConnectionSlot,
) -> Held {
    let (id, proxy) = shared.relays.insert(proxy_id, owner_id, link.clone());
    if let Some(served) = shared.registry.proxy(proxy_id) {
        served.end(Ending::Replaced);
    }
    // A drain that began while the owner was taking it: `end_all` ran before the insert.
    if *shared.draining.borrow() || shared.refusing.load(Ordering::Acquire) {
        link.end(Ending::Draining);
    }
    shared.metrics.relayed.inc();
    Held::new(shared.clone(), proxy, id, permit, slot)
}

/// A stream relay's source: the proxy's requests, undecoded.
struct Requests<S>(S);

impl<S: RequestStream> UpSource for Requests<S> {
    fn poll_chunk(&mut self, cx: &mut Context<'_>, link: &RelayLink) -> Poll<Option<Bytes>> {
        match ready!(self.0.poll_framed(cx)) {
            Some(Ok(req)) => Poll::Ready(Some(req)),
            // A request the proxy's stream cannot take: it ends the relay with that
            // status, and the owner's stream with the proxy's half-close.
            Some(Err(status)) => {
                link.fail(status);
                Poll::Ready(None)
            }
            None => Poll::Ready(None),
        }
    }
}

/// The owner's response body, as the proxy's: frames passed on as they arrive, the
/// owner's trailers as its status, or a retryable status when the relay is ended here
/// (hand-off, drain, a newer stream of the proxy) or the owner goes away.
pub(crate) struct Relayed {
    body: RecvStream,
    link: Arc<RelayLink>,
    /// The owner's data ended: its trailers come next.
    body_ended: bool,
    done: bool,
    held: Held,
}

/// What a relay holds while it lasts, given back when it ends: its entry in
/// [`Relays`](super::ownership::Relays), its place under `--max-streams` and on its
/// connection to the owner.
pub(crate) struct Held {
    shared: Arc<Shared>,
    /// The proxy's ID as [`Relays`](super::ownership::Relays) keeps it.
    proxy: Arc<str>,
    id: u64,
    _permit: OwnedSemaphorePermit,
    _slot: ConnectionSlot,
}

impl Held {
    pub(crate) fn new(
        shared: Arc<Shared>,
        proxy: Arc<str>,
        id: u64,
        permit: OwnedSemaphorePermit,
        slot: ConnectionSlot,
    ) -> Self {
        Held {
            shared,
            proxy,
            id,
            _permit: permit,
            _slot: slot,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.shared.relays.remove(&self.proxy, self.id);
        self.shared.metrics.relayed.dec();
    }
}

impl Drop for Relayed {
    fn drop(&mut self) {
        // The proxy is gone, or told: the request to the owner ends too.
        self.link.close();
    }
}

impl Relayed {
    fn end(&mut self, status: &Status) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.done = true;
        Poll::Ready(Some(Ok(Frame::trailers(super::outbound::trailers(status)))))
    }

    fn owner_gone(&mut self, e: &h2::Error) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let metrics = &self.held.shared.metrics;
        metrics.relay_failed(RelayFailure::OwnerGone);
        debug!(error = %e, "the relay's owner stream failed");
        self.end(&Status::unavailable(format!(
            "the proxy's owner went away ({e}); reconnect"
        )))
    }
}

impl Body for Relayed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.done {
            return Poll::Ready(None);
        }
        self.link.down.register(cx.waker());
        if let Some(status) = self.link.status() {
            return self.end(&status);
        }
        if !self.body_ended {
            match ready!(self.body.poll_data(cx)) {
                Some(Ok(data)) => {
                    // Handed to the proxy's stream, which holds it until the proxy reads.
                    let _ = self.body.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(e)) => return self.owner_gone(&e),
                None => self.body_ended = true,
            }
        }
        match ready!(self.body.poll_trailers(cx)) {
            Ok(Some(trailers)) => {
                self.done = true;
                Poll::Ready(Some(Ok(Frame::trailers(trailers))))
            }
            Ok(None) => self.end(&Status::unavailable(
                "the owner ended the stream; reconnect",
            )),
            Err(e) => self.owner_gone(&e),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
pub(crate) mod tests;
