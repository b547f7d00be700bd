//! The ADS server's rustls config: the certificate from a watch, ALPN h2, and an optional
//! client certificate verified against the mesh root (also from a watch).

use super::{TlsMaterial, provider};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig};
use rustls::{Error, SignatureScheme};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// The server config of a secure ADS listener.
pub fn server_config(material: &TlsMaterial) -> Result<Arc<ServerConfig>, Error> {
    let provider = provider();
    let mut config = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(Arc::new(WatchedClientVerifier::new(
            material.roots.clone(),
            provider,
        )))
        .with_cert_resolver(Arc::new(WatchedCert(material.cert.clone())));
    // gRPC is HTTP/2 only.
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// Serves whatever certificate the watch holds now.
pub struct WatchedCert(pub watch::Receiver<Arc<CertifiedKey>>);

impl std::fmt::Debug for WatchedCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WatchedCert")
    }
}

impl ResolvesServerCert for WatchedCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.borrow().clone())
    }
}

/// Asks for a client certificate, without requiring one (a proxy may authenticate with a
/// token instead), and verifies one presented against the mesh root the watch holds now.
pub struct WatchedClientVerifier {
    roots: watch::Receiver<Arc<RootCertStore>>,
    provider: Arc<CryptoProvider>,
    /// The verifier built for the roots last seen (rebuilt when they change); `None`: no
    /// roots, no client certificate asked for.
    built: Mutex<Built>,
}

/// The roots a verifier was built for, and the verifier.
type Built = (Arc<RootCertStore>, Option<Arc<dyn ClientCertVerifier>>);

impl std::fmt::Debug for WatchedClientVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WatchedClientVerifier")
    }
}

impl WatchedClientVerifier {
    pub fn new(roots: watch::Receiver<Arc<RootCertStore>>, provider: Arc<CryptoProvider>) -> Self {
        let current = roots.borrow().clone();
        let built = Self::build(&current, &provider);
        WatchedClientVerifier {
            roots,
            provider,
            built: Mutex::new((current, built)),
        }
    }

    fn build(
        roots: &Arc<RootCertStore>,
        provider: &Arc<CryptoProvider>,
    ) -> Option<Arc<dyn ClientCertVerifier>> {
        if roots.is_empty() {
            return None;
        }
        match WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .allow_unauthenticated()
            .build()
        {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!(error = %e, "the mesh root cannot verify client certificates; none asked for");
                None
            }
        }
    }

    fn current(&self) -> Option<Arc<dyn ClientCertVerifier>> {
        let roots = self.roots.borrow().clone();
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if !Arc::ptr_eq(&built.0, &roots) {
            let verifier = Self::build(&roots, &self.provider);
            *built = (roots, verifier);
        }
        built.1.clone()
    }
}

impl ClientCertVerifier for WatchedClientVerifier {
    fn offer_client_auth(&self) -> bool {
        self.current().is_some()
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // No hints (the roots may change under a borrowed slice): a client sends the
        // certificate it has.
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        match self.current() {
            Some(v) => v.verify_client_cert(end_entity, intermediates, now),
            None => Err(Error::General(
                "no mesh root to verify client certificates against".into(),
            )),
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
