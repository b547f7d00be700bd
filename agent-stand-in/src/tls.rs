//! TLS towards the discovery server and the CA: the server is verified against the pinned
//! root only (not the OS trust store) and must carry the expected name, as the agent does
//! with `XDS_ROOT_CA` / `CA_ROOT_CA` and `ISTIOD_SAN`.

use anyhow::{Context, bail};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// A client config trusting only the roots in `root_pem`, speaking h2 (gRPC).
pub fn client_config(root_pem: &str, server_name: &str) -> anyhow::Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(root_pem.as_bytes()) {
        roots
            .add(cert.context("a certificate of the root PEM")?)
            .context("a root the verifier cannot use")?;
    }
    if roots.is_empty() {
        bail!("the root PEM holds no certificate");
    }
    ServerName::try_from(server_name.to_string())
        .with_context(|| format!("{server_name:?} is not a server name"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// A tonic connector: TCP to the URI's host and port, TLS verifying `server_name`.
#[derive(Clone)]
pub struct Connector {
    pub config: Arc<ClientConfig>,
    pub server_name: ServerName<'static>,
    pub connect_timeout: Duration,
}

type Connecting = Pin<Box<dyn Future<Output = io::Result<TokioIo<TlsStream<TcpStream>>>> + Send>>;

impl tower_service::Service<http::Uri> for Connector {
    type Response = TokioIo<TlsStream<TcpStream>>;
    type Error = io::Error;
    type Future = Connecting;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Connecting {
        let this = self.clone();
        Box::pin(async move {
            let host = uri
                .host()
                .unwrap_or_default()
                .trim_matches(['[', ']'])
                .to_string();
            let port = uri.port_u16().unwrap_or(15012);
            let connect = async {
                let tcp = TcpStream::connect((host.as_str(), port)).await?;
                tcp.set_nodelay(true)?;
                TlsConnector::from(this.config)
                    .connect(this.server_name, tcp)
                    .await
            };
            match tokio::time::timeout(this.connect_timeout, connect).await {
                Ok(r) => r.map(TokioIo::new),
                Err(_) => Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "connecting to {host}:{port} took over {:?}",
                        this.connect_timeout
                    ),
                )),
            }
        })
    }
}

/// A lazily connected gRPC channel to `addr` (host:port) over TLS.
pub fn channel(
    addr: &str,
    server_name: &str,
    config: Arc<ClientConfig>,
) -> anyhow::Result<tonic::transport::Channel> {
    let connector = Connector {
        config,
        server_name: ServerName::try_from(server_name.to_string())
            .with_context(|| format!("{server_name:?} is not a server name"))?,
        connect_timeout: Duration::from_secs(5),
    };
    Ok(
        tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .with_context(|| format!("{addr:?} is not host:port"))?
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true)
            .connect_with_connector_lazy(connector),
    )
}
