//! The relay's mTLS client: an edge dials the proxy's owner presenting its own serving
//! certificate (which names the edge SPIFFE ID), and takes the owner only if it presents
//! the edge SPIFFE ID under the mesh root. Names are not checked (an owner is dialled
//! by pod IP): the SPIFFE ID is the identity, as between Istio workloads.

use super::{TlsMaterial, peer, provider};
use hyper_util::rt::TokioIo;
use rustls::client::ResolvesClientCert;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, DigitallySignedStruct, Error, RootCertStore, SignatureScheme};
use shoal_proto::security::SpiffeId;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The client config of relays: `edge` is the SPIFFE ID every edge presents.
pub fn relay_config(material: &TlsMaterial, edge: SpiffeId) -> Result<Arc<ClientConfig>, Error> {
    let provider = provider();
    let mut config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(EdgeVerifier {
            roots: material.roots.clone(),
            edge,
            provider,
        }))
        .with_client_cert_resolver(Arc::new(WatchedClientCert(material.cert.clone())));
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// Presents the certificate the watch holds now.
struct WatchedClientCert(watch::Receiver<Arc<CertifiedKey>>);

impl std::fmt::Debug for WatchedClientCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WatchedClientCert")
    }
}

impl ResolvesClientCert for WatchedClientCert {
    fn resolve(&self, _: &[&[u8]], _: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.0.borrow().clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// Takes a server whose chain leads to the mesh root and whose leaf names `edge`.
struct EdgeVerifier {
    roots: watch::Receiver<Arc<RootCertStore>>,
    edge: SpiffeId,
    provider: Arc<CryptoProvider>,
}

impl std::fmt::Debug for EdgeVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeVerifier")
            .field("edge", &self.edge.to_string())
            .finish_non_exhaustive()
    }
}

impl ServerCertVerifier for EdgeVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let roots = self.roots.borrow().clone();
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        match peer::spiffe_id(end_entity) {
            Some(id) if id == self.edge => Ok(ServerCertVerified::assertion()),
            other => Err(Error::General(format!(
                "the relay's owner presents {}, not the edge identity {}",
                other.map_or_else(|| "no SPIFFE ID".to_string(), |id| id.to_string()),
                self.edge
            ))),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Dials another edge (or, in tests and benches, any server) over TLS with `config`.
#[derive(Clone)]
pub struct RelayConnector {
    pub config: Arc<ClientConfig>,
    pub connect_timeout: Duration,
}

impl RelayConnector {
    /// A TLS connection to `host:port` (an IPv6 host with or without its brackets), within
    /// the connect timeout.
    pub async fn connect(&self, host: &str, port: u16) -> io::Result<TlsStream<TcpStream>> {
        let host = host.trim_matches(['[', ']']);
        let timeout = self.connect_timeout;
        let connect = async {
            let tcp = TcpStream::connect((host, port)).await?;
            tcp.set_nodelay(true)?;
            let name = ServerName::try_from(host.to_string())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            TlsConnector::from(self.config.clone())
                .connect(name, tcp)
                .await
        };
        match tokio::time::timeout(timeout, connect).await {
            Ok(r) => r,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connecting to {host}:{port} took over {timeout:?}"),
            )),
        }
    }
}

type Connecting = Pin<Box<dyn Future<Output = io::Result<TokioIo<TlsStream<TcpStream>>>> + Send>>;

/// As a tonic connector (a proxy's client, in tests and benches).
impl tower_service::Service<http::Uri> for RelayConnector {
    type Response = TokioIo<TlsStream<TcpStream>>;
    type Error = io::Error;
    type Future = Connecting;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Connecting {
        let connector = self.clone();
        Box::pin(async move {
            let host = uri.host().unwrap_or_default();
            let port = uri.port_u16().unwrap_or(15012);
            connector.connect(host, port).await.map(TokioIo::new)
        })
    }
}
