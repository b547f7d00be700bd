//! How a connection to an edge is made: plaintext, or TLS verified against the mesh root
//! under the name an agent checks (`istiod.istio-system.svc` by default), as pilot-agent
//! dials istiod's 15012. A tonic connector, so streams share HTTP/2 connections as before.
//!
//! Either way the connection's writes are gathered ([`Coalesced`]), as the edge gathers
//! its own: a connection carries many proxies' streams, and HTTP/2 would write and flush
//! each of their requests by itself.

use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use shoal_infra::coalesced::Coalesced;
use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// The name pilot-agent verifies on istiod's certificate by default.
pub const DEFAULT_SERVER_NAME: &str = "istiod.istio-system.svc";

#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("reading the TLS CA {path}: {reason}")]
    Ca { path: String, reason: String },
    #[error("invalid TLS server name {0:?}")]
    ServerName(String),
    #[error("TLS client configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// A connection's writes are gathered up to this many bytes by default, as the edge's
/// `--write-coalesce-bytes`.
pub const DEFAULT_WRITE_COALESCE_BYTES: usize = 64 * 1024;

/// Plaintext, or TLS to a verified server name; the connection's writes gathered.
#[derive(Clone, Debug)]
pub struct Dial {
    /// TLS to a verified name; plaintext when `None`.
    pub tls: Option<TlsDial>,
    /// Writes are gathered up to this many bytes (`0`: written as they come).
    pub write_coalesce_bytes: usize,
}

impl Default for Dial {
    fn default() -> Self {
        Dial {
            tls: None,
            write_coalesce_bytes: DEFAULT_WRITE_COALESCE_BYTES,
        }
    }
}

impl Dial {
    /// Plaintext, writes gathered by default.
    pub fn plain() -> Dial {
        Dial::default()
    }

    /// TLS with `tls`, writes gathered by default.
    pub fn tls(tls: TlsDial) -> Dial {
        Dial {
            tls: Some(tls),
            ..Dial::default()
        }
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A tonic connector dialling the URI's `host:port` this way.
    pub fn connector(&self, connect_timeout: Duration) -> Connect {
        Connect {
            tls: self.tls.clone(),
            write_coalesce_bytes: self.write_coalesce_bytes,
            connect_timeout,
        }
    }
}

/// The TLS client configuration (mesh root, ALPN h2) and the name to verify.
#[derive(Clone)]
pub struct TlsDial {
    config: Arc<ClientConfig>,
    server_name: ServerName<'static>,
}

impl std::fmt::Debug for TlsDial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsDial")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl TlsDial {
    /// Trusts the certificates of the PEM file `ca` and verifies `server_name`.
    pub fn new(ca: &Path, server_name: &str) -> Result<Self, DialError> {
        let ca_error = |reason: String| DialError::Ca {
            path: ca.display().to_string(),
            reason,
        };
        let mut roots = RootCertStore::empty();
        let certs = CertificateDer::pem_file_iter(ca).map_err(|e| ca_error(e.to_string()))?;
        for cert in certs {
            let cert = cert.map_err(|e| ca_error(e.to_string()))?;
            roots.add(cert).map_err(|e| ca_error(e.to_string()))?;
        }
        if roots.is_empty() {
            return Err(ca_error("no CERTIFICATE in it".into()));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let server_name = ServerName::try_from(server_name.to_string())
            .map_err(|_| DialError::ServerName(server_name.into()))?;
        Ok(TlsDial {
            config: Arc::new(config),
            server_name,
        })
    }
}

/// A dialled connection, plaintext or TLS.
pub trait Dialed: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Dialed for T {}

/// What [`Connect`] hands tonic: the connection, its writes gathered.
pub type Conn = TokioIo<Coalesced<Box<dyn Dialed>>>;

/// Connects TCP, then TLS when configured, within `connect_timeout`.
#[derive(Clone, Debug)]
pub struct Connect {
    tls: Option<TlsDial>,
    write_coalesce_bytes: usize,
    connect_timeout: Duration,
}

type Connecting = Pin<Box<dyn Future<Output = io::Result<Conn>> + Send>>;

impl tower_service::Service<http::Uri> for Connect {
    type Response = Conn;
    type Error = io::Error;
    type Future = Connecting;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Connecting {
        let (tls, coalesce, timeout) = (
            self.tls.clone(),
            self.write_coalesce_bytes,
            self.connect_timeout,
        );
        Box::pin(async move {
            let host = uri
                .host()
                .unwrap_or_default()
                .trim_matches(['[', ']'])
                .to_string();
            let over = if tls.is_some() { " over TLS" } else { "" };
            let port = uri
                .port_u16()
                .unwrap_or(if tls.is_some() { 15012 } else { 15010 });
            let connect = async {
                let tcp = TcpStream::connect((host.as_str(), port)).await?;
                tcp.set_nodelay(true)?;
                let stream: Box<dyn Dialed> = match tls {
                    Some(dial) => Box::new(
                        TlsConnector::from(dial.config)
                            .connect(dial.server_name, tcp)
                            .await?,
                    ),
                    None => Box::new(tcp),
                };
                io::Result::Ok(stream)
            };
            match tokio::time::timeout(timeout, connect).await {
                Ok(r) => r.map(|stream| TokioIo::new(Coalesced::new(stream, coalesce))),
                Err(_) => Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("connecting to {host}:{port}{over} took over {timeout:?}"),
                )),
            }
        })
    }
}
