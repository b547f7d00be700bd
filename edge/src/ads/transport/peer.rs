//! One HTTP/2 connection to another edge, over mTLS, on h2 directly: the relays and
//! tunnels to that edge are its streams. It is made by the first stream that needs it, and
//! again by the first after it failed. Without hyper's client in between, a stream costs
//! no task of its own (hyper pipes each streaming request body in a task, ~1.5 KiB), and
//! whoever reads a response decides when its window reopens.

use crate::tls::client::RelayConnector;
use bytes::Bytes;
use h2::client::{ResponseFuture, SendRequest};
use h2::{RecvStream, SendStream};
use http::header::HeaderMap;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, StatusCode, Uri};
use std::sync::{Arc, Mutex, Weak};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tracing::debug;

/// Responses are copied on as they arrive: a small per-stream window keeps what waits in
/// a relay small, a large connection window keeps many relays from waiting on each other.
const STREAM_WINDOW: u32 = 256 * 1024;
const CONNECTION_WINDOW: u32 = 32 * 1024 * 1024;
/// The largest DATA frame the owner may send: a response crosses in a few frames rather
/// than one per 16 KiB (h2's default), each of which both edges handle on its own.
const MAX_FRAME: u32 = 256 * 1024;
/// Streams the connection remembers after resetting them, so that frames the owner had
/// in flight for them are dropped rather than answered with STREAM_CLOSED: relays end by
/// the hundred in a hand-off, and h2's default (50) forgets them within a batch.
const REMEMBERED_RESETS: usize = 16 * 1024;

type Connected = (
    SendRequest<Bytes>,
    h2::client::Connection<TlsStream<TcpStream>, Bytes>,
);

/// A connection to the edge at one address, made when a stream first needs it.
pub(crate) struct PeerConnection {
    authority: Authority,
    port: u16,
    tls: RelayConnector,
    live: Mutex<Live>,
    /// One connect at a time: the streams of a storm wait for it rather than each dialling.
    connecting: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Live {
    /// Counts the connections made, so that one ending forgets only itself.
    made: u64,
    sender: Option<SendRequest<Bytes>>,
    /// Counts the connects that finished, and why the last one failed: the streams that
    /// waited on a connect that failed fail with it rather than each trying again (an
    /// owner that cannot be reached is not waited for: its proxies are served here).
    attempts: u64,
    failure: String,
}

impl PeerConnection {
    /// The connection to `addr` (`host:port`), not yet made.
    pub fn new(addr: &str, tls: RelayConnector) -> Result<Arc<PeerConnection>, String> {
        let authority: Authority = addr
            .parse()
            .map_err(|e| format!("edge address {addr:?}: {e}"))?;
        let port = authority
            .port_u16()
            .ok_or_else(|| format!("edge address {addr:?} has no port"))?;
        Ok(Arc::new(PeerConnection {
            authority,
            port,
            tls,
            live: Mutex::default(),
            connecting: tokio::sync::Mutex::new(()),
        }))
    }

    /// Opens a stream: a POST to `path` with `headers`, its request body begun with
    /// `first`; the response once the edge takes it (HTTP 200 without a grpc-status), why
    /// not when it does not (unreachable, refusing). The request body goes on in the
    /// returned [`SendStream`].
    pub async fn open(
        self: &Arc<Self>,
        path: &'static str,
        headers: HeaderMap,
        first: Bytes,
    ) -> Result<(RecvStream, SendStream<Bytes>), String> {
        let (response, send) = self.send(path, headers, first).await?;
        let response = response.await.map_err(|e| e.to_string())?;
        if response.status() != StatusCode::OK {
            return Err(format!("HTTP {}", response.status()));
        }
        // A refusal is a trailers-only response: grpc-status in the headers.
        if let Some(code) = response.headers().get("grpc-status") {
            let message = response.headers().get("grpc-message");
            return Err(format!("refused with grpc-status {code:?} ({message:?})"));
        }
        Ok((response.into_body(), send))
    }

    async fn send(
        self: &Arc<Self>,
        path: &'static str,
        headers: HeaderMap,
        first: Bytes,
    ) -> Result<(ResponseFuture, SendStream<Bytes>), String> {
        let uri = Uri::builder()
            .scheme(Scheme::HTTP)
            .authority(self.authority.clone())
            .path_and_query(PathAndQuery::from_static(path))
            .build()
            .map_err(|e| e.to_string())?;
        let mut request = Request::post(uri).body(()).map_err(|e| e.to_string())?;
        *request.headers_mut() = headers;
        let sender = self.sender().await?;
        let mut sender = sender.ready().await.map_err(|e| e.to_string())?;
        let (response, mut send) = sender
            .send_request(request, false)
            .map_err(|e| e.to_string())?;
        send.send_data(first, false).map_err(|e| e.to_string())?;
        Ok((response, send))
    }

    /// The live connection's sender, connecting when there is none.
    async fn sender(self: &Arc<Self>) -> Result<SendRequest<Bytes>, String> {
        let attempts = {
            let live = self.live();
            if let Some(sender) = &live.sender {
                return Ok(sender.clone());
            }
            live.attempts
        };
        let _connecting = self.connecting.lock().await;
        {
            let live = self.live();
            if let Some(sender) = &live.sender {
                return Ok(sender.clone());
            }
            if live.attempts != attempts {
                return Err(live.failure.clone());
            }
        }
        let connected = self.connect().await;
        let mut live = self.live();
        live.attempts += 1;
        let (sender, connection) = match connected {
            Ok(c) => c,
            Err(e) => {
                live.failure.clone_from(&e);
                return Err(e);
            }
        };
        live.made += 1;
        live.sender = Some(sender.clone());
        let (me, made, peer) = (Arc::downgrade(self), live.made, self.authority.clone());
        tokio::spawn(drive(connection, me, made, peer));
        Ok(sender)
    }

    async fn connect(&self) -> Result<Connected, String> {
        let io = self
            .tls
            .connect(self.authority.host(), self.port)
            .await
            .map_err(|e| e.to_string())?;
        h2::client::Builder::new()
            .initial_window_size(STREAM_WINDOW)
            .max_frame_size(MAX_FRAME)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .max_concurrent_reset_streams(REMEMBERED_RESETS)
            // h2 closes a connection (GOAWAY ENHANCE_YOUR_CALM) once it has reset 1,024
            // streams for the peer's protocol errors over its whole life: a guard against
            // hostile peers that, on a connection carrying relays, ends them all at once
            // after enough hand-offs. The peer is an authenticated edge.
            .max_local_error_reset_streams(None)
            .enable_push(false)
            .handshake(io)
            .await
            .map_err(|e| e.to_string())
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs connection `made` until it ends (the edge went away, or it was forgotten and its
/// last stream ended), then forgets it: the next stream connects again.
async fn drive<T>(
    connection: h2::client::Connection<T, Bytes>,
    peer: Weak<PeerConnection>,
    made: u64,
    authority: Authority,
) where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    if let Err(e) = connection.await {
        debug!(peer = %authority, error = %e, "the connection to the edge ended");
    }
    if let Some(peer) = peer.upgrade() {
        let mut live = peer.live();
        if live.made == made {
            live.sender = None;
        }
    }
}

#[cfg(test)]
mod tests;
