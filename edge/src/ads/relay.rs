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

use super::error::AdsError;
use super::outbound::{self, Outbound};
use super::protocol::Protocol;
use super::shared::Shared;
use super::transport::frame;
use crate::membership::Ring;
use crate::proxy::Proxy;
use crate::tls::PeerInfo;
use crate::tls::client::RelayConnector;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use http::header::{CONTENT_TYPE, HeaderValue, TE};
use http_body::{Body as _, Frame};
use shoal_proto::security::{AuthMethod, Identity, SpiffeId};
use shoal_proto::transport::Member;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

/// How long a relay waits for the owner to take the stream (its response headers) before
/// serving the proxy here. An owner that is down refuses at once (or within the 1 s
/// connect timeout); one busy with a connection storm can take seconds, and serving its
/// proxies here instead only moves them again at the next re-home: measured at 1,500
/// proxies opening at once, 2 s left ~20% of them away from their owner.
const RELAY_OPEN_TIMEOUT: Duration = Duration::from_secs(10);
use tokio::sync::{mpsc, oneshot, watch};
use tonic::Status;
use tonic::codegen::Service;
use tonic::transport::{Channel, Endpoint};
use tracing::{Instrument, debug, info, warn};

/// The header that marks a relayed stream, naming the edge that relays it.
pub const RELAYED_BY: &str = "x-shoal-relayed-by";
/// The identity the relaying edge authenticated the proxy as: `<spiffe id>;<method>`, or
/// `anonymous` for a stream it took on plaintext.
pub const RELAYED_IDENTITY: &str = "x-shoal-relayed-identity";

/// The identity a relayed stream carries. `Ok(None)`: not relayed. A stream with relay
/// headers is refused PERMISSION_DENIED unless its peer is an edge: its TLS client
/// certificate, verified against the mesh root, names `edge`.
pub(crate) fn relayed_identity(
    edge: &SpiffeId,
    peer: Option<&PeerInfo>,
    headers: &http::HeaderMap,
) -> Result<Option<Identity>, Status> {
    if !headers.contains_key(RELAYED_BY) && !headers.contains_key(RELAYED_IDENTITY) {
        return Ok(None);
    }
    let presented = match peer {
        None => "a plaintext stream".to_string(),
        Some(p) => match &p.spiffe {
            Some(id) if id == edge => {
                let value = headers
                    .get(RELAYED_IDENTITY)
                    .map(|v| v.to_str().unwrap_or("\u{fffd}"))
                    .unwrap_or("anonymous");
                return parse_identity(value).map(Some).map_err(|reason| {
                    Status::invalid_argument(format!("{RELAYED_IDENTITY} {value:?}: {reason}"))
                });
            }
            Some(id) => format!("a client certificate for {id}"),
            None => "no edge client certificate".to_string(),
        },
    };
    Err(Status::permission_denied(format!(
        "{RELAYED_BY} / {RELAYED_IDENTITY} are taken only from another Shoal edge (a client \
         certificate for {edge} under the mesh root); this stream presents {presented}"
    )))
}

/// The [`RELAYED_IDENTITY`] value of `identity`.
pub(crate) fn identity_header(identity: &Identity) -> String {
    match identity.principal() {
        None => "anonymous".into(),
        Some(p) => format!("{};{}", p.spiffe_id(), p.method.as_str()),
    }
}

fn parse_identity(value: &str) -> Result<Identity, String> {
    if value == "anonymous" {
        return Ok(Identity::Anonymous);
    }
    let (id, method) = value
        .split_once(';')
        .ok_or("expected <spiffe id>;<method> or anonymous")?;
    let method = [AuthMethod::Jwt, AuthMethod::ClientCertificate]
        .into_iter()
        .find(|m| m.as_str() == method)
        .ok_or_else(|| format!("unknown method {method:?}"))?;
    let id = SpiffeId::parse(id).map_err(|e| e.to_string())?;
    Ok(Identity::authenticated(id.into_principal(method)))
}

const RELAY_STREAM_WINDOW: u32 = 256 * 1024;
const RELAY_CONNECTION_WINDOW: u32 = 32 * 1024 * 1024;

/// This edge's view of ownership.
pub(crate) struct Placement {
    pub me: String,
    pub ring: watch::Receiver<Arc<Ring>>,
}

/// How long a new stream waits for this edge's first ring (the members read after it
/// registered) before it is refused with a retryable status: without the ring, the edge
/// would take the proxy as its own and move it again later.
const RING_WAIT: Duration = Duration::from_secs(5);

impl Placement {
    /// The member that owns `proxy_id`, when it is another edge; waits (within
    /// [`RING_WAIT`]) for the first ring.
    pub async fn owner_elsewhere(&self, proxy_id: &str) -> Result<Option<Member>, Status> {
        let mut ring = self.ring.clone();
        if !matches!(
            tokio::time::timeout(RING_WAIT, crate::membership::known(&mut ring)).await,
            Ok(true)
        ) {
            return Err(Status::unavailable(
                "this edge has not read the edge ring yet (membership bucket); reconnect",
            ));
        }
        let ring = ring.borrow();
        Ok(ring.owner(proxy_id).filter(|m| m.id != self.me).cloned())
    }
}

/// The streams this edge relays, and its connections to the other edges.
#[derive(Default)]
pub(crate) struct Relays {
    channels: Mutex<HashMap<String, Channel>>,
    active: Mutex<HashMap<u64, Relayed>>,
    next: AtomicU64,
}

struct Relayed {
    proxy: String,
    owner: String,
    close: watch::Sender<bool>,
}

impl Relays {
    fn channel(&self, addr: &str, tls: &RelayConnector) -> Result<Channel, String> {
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = channels.get(addr) {
            return Ok(c.clone());
        }
        // `http`: TLS is the connector's (mTLS as the edge identity), not tonic's.
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| e.to_string())?
            .connect_timeout(Duration::from_secs(1))
            .tcp_nodelay(true)
            // Relayed responses are copied down as they arrive: a small per-stream window
            // keeps what waits in a relay small, a large connection window keeps many
            // relayed streams from waiting on each other.
            .initial_stream_window_size(RELAY_STREAM_WINDOW)
            .initial_connection_window_size(RELAY_CONNECTION_WINDOW)
            .connect_with_connector_lazy(tls.clone());
        channels.insert(addr.to_string(), channel.clone());
        Ok(channel)
    }

    /// Relayed streams now.
    pub fn len(&self) -> usize {
        self.active.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// `(proxy, owner)` of every relayed stream.
    pub fn streams(&self) -> Vec<(String, String)> {
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        active
            .values()
            .map(|r| (r.proxy.clone(), r.owner.clone()))
            .collect()
    }

    /// Ends the relay of `proxy` with a retryable status; false if none.
    pub fn hand_off(&self, proxy: &str) -> bool {
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        let mut found = false;
        for r in active.values().filter(|r| r.proxy == proxy) {
            r.close.send_replace(true);
            found = true;
        }
        found
    }

    fn insert(&self, proxy: &str, owner: &str) -> (u64, watch::Receiver<bool>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (close, closed) = watch::channel(false);
        let relayed = Relayed {
            proxy: proxy.to_string(),
            owner: owner.to_string(),
            close,
        };
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        active.insert(id, relayed);
        (id, closed)
    }

    fn remove(&self, id: u64) {
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        active.remove(&id);
    }
}

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

/// Relays the stream to `owner`. `Err` gives the stream back, untouched but for its
/// first request, when the owner cannot take it: the caller serves it itself.
pub(crate) async fn relay<M, S>(
    shared: &Arc<Shared>,
    owner: Member,
    proxy: &Proxy,
    first: M::Request,
    inbound: S,
) -> Result<Outbound, (M::Request, S)>
where
    M: Protocol,
    S: Stream<Item = Result<M::Request, Status>> + Unpin + Send + 'static,
{
    let (Some(placement), Some(tls)) = (shared.placement.get(), shared.relay_tls.get()) else {
        debug!(owner = %owner.id, "no TLS to relay with; serving here");
        return Err((first, inbound));
    };
    let proxy_id = proxy.id.as_str();
    let mut channel = match shared.relays.channel(&owner.xds_addr, tls) {
        Ok(c) => c,
        Err(e) => {
            warn!(owner = %owner.id, addr = %owner.xds_addr, error = %e, "owner address unusable; serving here");
            return Err((first, inbound));
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
            return Err((first, inbound));
        }
        Err(_) => {
            debug!(owner = %owner.id, "owner slow to take the stream; serving here");
            return Err((first, inbound));
        }
    };
    let (out_tx, out_rx) = outbound::channel(shared.config.stream_buffer.max(1));
    let (close_tx, close_rx) = oneshot::channel();
    let (id, closed) = shared.relays.insert(proxy_id, &owner.id);
    shared.metrics.relayed.inc();
    let span =
        tracing::info_span!("relay", protocol = M::NAME, proxy = %proxy_id, owner = %owner.id);
    let task = pump::<M, S>(inbound, tx, body, out_tx, close_tx, closed);
    let shared = shared.clone();
    tokio::spawn(
        async move {
            info!("relaying to the proxy's owner");
            task.await;
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
    down: outbound::Sender,
    close: oneshot::Sender<Status>,
    mut closed: watch::Receiver<bool>,
) where
    M: Protocol,
    S: Stream<Item = Result<M::Request, Status>> + Unpin + Send,
{
    let status = loop {
        tokio::select! {
            _ = async { drop(closed.wait_for(|c| *c).await) } => {
                break Some(AdsError::HandedOff.to_status());
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
