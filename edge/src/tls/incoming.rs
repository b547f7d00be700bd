//! The accept loop of a TLS listener: each connection's handshake runs in its own task
//! under a timeout, so a client that stalls its handshake holds only its own task, never
//! the loop; at most a bounded number of handshakes run at once.

use super::peer;
use bytes::Bytes;
use rustls::ServerConfig;
use shoal_proto::security::SpiffeId;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;
use tracing::debug;

/// Bounds of the accept loop.
#[derive(Clone, Copy, Debug)]
pub struct HandshakeLimits {
    /// A handshake not done within this is dropped.
    pub timeout: Duration,
    /// Handshakes in progress at once; the loop waits for a slot beyond it.
    pub concurrent: usize,
}

impl Default for HandshakeLimits {
    fn default() -> Self {
        // istiod's gRPC server gives a handshake 10 s (grpc-go's default connection timeout
        // is 120 s; a proxy that cannot finish in 10 s is not worth a slot).
        HandshakeLimits {
            timeout: Duration::from_secs(10),
            concurrent: 1024,
        }
    }
}

/// What a stream learns of its connection: the request extension tonic sets from
/// [`Connected`].
#[derive(Clone, Debug, Default)]
pub struct PeerInfo {
    pub remote: Option<SocketAddr>,
    /// The client's certificate chain (DER, leaf first), verified against the mesh root
    /// in the handshake; empty when it presented none.
    pub certificates: Arc<[Bytes]>,
    /// The SPIFFE ID of the verified leaf.
    pub spiffe: Option<SpiffeId>,
    /// Closes the connection beneath HTTP/2, for one another edge passed on here (a
    /// tunnel): its proxy then reconnects there; `None` for one accepted here.
    pub closer: Option<Closer>,
}

/// Closes a connection beneath its HTTP/2 layer, unless other streams still use it.
#[derive(Clone)]
pub struct Closer {
    close: Arc<dyn Fn() + Send + Sync>,
    /// Streams of the connection that hold it ([`Closer::hold`]).
    streams: Arc<AtomicUsize>,
}

impl Closer {
    pub fn new(close: impl Fn() + Send + Sync + 'static) -> Self {
        Closer {
            close: Arc::new(close),
            streams: Arc::default(),
        }
    }

    /// Counts a stream on the connection until [`Closer::release`].
    pub fn hold(&self) {
        self.streams.fetch_add(1, Ordering::AcqRel);
    }

    pub fn release(&self) {
        self.streams.fetch_sub(1, Ordering::AcqRel);
    }

    /// Closes the connection unless streams other than `own` (1 for a stream that holds
    /// it, 0 for one that never did) still use it: a connection that carries several
    /// proxies (a load generator's) keeps serving the others.
    pub fn close_unless_shared(&self, own: usize) {
        if self.streams.load(Ordering::Acquire) <= own {
            (self.close)()
        }
    }
}

impl std::fmt::Debug for Closer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Closer")
    }
}

/// An accepted connection and what is known of its peer (tonic's [`Connected`] info).
pub struct PeerConn<IO> {
    inner: IO,
    info: PeerInfo,
}

/// One accepted TLS connection.
pub type TlsConn = PeerConn<tokio_rustls::server::TlsStream<TcpStream>>;

impl<IO> PeerConn<IO> {
    pub fn new(inner: IO, info: PeerInfo) -> Self {
        PeerConn { inner, info }
    }
}

impl TlsConn {
    fn accepted(inner: tokio_rustls::server::TlsStream<TcpStream>, remote: SocketAddr) -> Self {
        let certificates: Arc<[Bytes]> = inner
            .get_ref()
            .1
            .peer_certificates()
            .unwrap_or_default()
            .iter()
            .map(|c| Bytes::copy_from_slice(c.as_ref()))
            .collect();
        let spiffe = certificates.first().and_then(|c| peer::spiffe_id(c));
        let info = PeerInfo {
            remote: Some(remote),
            certificates,
            spiffe,
            closer: None,
        };
        PeerConn::new(inner, info)
    }
}

impl<IO> Connected for PeerConn<IO> {
    type ConnectInfo = PeerInfo;

    fn connect_info(&self) -> PeerInfo {
        self.info.clone()
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for PeerConn<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for PeerConn<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Accepts TLS connections on `listener` until the returned stream is dropped (tonic's
/// `serve_with_incoming_shutdown` drops it on shutdown). Failed handshakes are logged and
/// dropped, never passed on.
pub fn incoming(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    limits: HandshakeLimits,
) -> ReceiverStream<io::Result<TlsConn>> {
    let (tx, rx) = mpsc::channel(limits.concurrent.max(1));
    let acceptor = TlsAcceptor::from(config);
    let slots = Arc::new(Semaphore::new(limits.concurrent.max(1)));
    tokio::spawn(async move {
        loop {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let accepted = tokio::select! {
                _ = tx.closed() => return,
                a = listener.accept() => a,
            };
            let (tcp, remote) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment, keep serving.
                    debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                let _slot = slot;
                match tokio::time::timeout(limits.timeout, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        let _ = tx.send(Ok(TlsConn::accepted(tls, remote))).await;
                    }
                    Ok(Err(e)) => debug!(%remote, error = %e, "TLS handshake failed"),
                    Err(_) => debug!(%remote, timeout = ?limits.timeout, "TLS handshake timed out"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}
