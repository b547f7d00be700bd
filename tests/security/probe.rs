//! What a TLS server presents: its chain, seen by a client that trusts anything (the
//! test checks the chain itself) and presents a certificate of its own when asked.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use std::sync::{Arc, Mutex};
use tokio::net::TcpStream;

#[derive(Debug, Default)]
struct Capture(Mutex<Vec<Vec<u8>>>);

impl ServerCertVerifier for Capture {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let mut chain = vec![end_entity.to_vec()];
        chain.extend(intermediates.iter().map(|c| c.to_vec()));
        *self.0.lock().unwrap() = chain;
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The chain (DER, leaf first) the server at `127.0.0.1:port` presents, for SNI `sni`,
/// to a client presenting `client` (cert PEM, key PEM) when given.
pub async fn presented_chain(
    port: u16,
    sni: &str,
    client: Option<&(String, String)>,
) -> Result<Vec<Vec<u8>>, String> {
    let capture = Arc::new(Capture::default());
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(capture.clone());
    let config = match client {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(cert.as_bytes()).map_err(|e| e.to_string())?],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| e.to_string())?,
            )
            .map_err(|e| e.to_string())?,
        None => builder.with_no_client_auth(),
    };
    let tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect {port}: {e}"))?;
    let name = ServerName::try_from(sni.to_string()).map_err(|e| e.to_string())?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS to {port}: {e}"))?;
    let chain = capture.0.lock().unwrap().clone();
    Ok(chain)
}

/// The URI SANs of a DER certificate.
pub fn uri_sans(der: &[u8]) -> Vec<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).expect("X.509");
    cert.subject_alternative_name()
        .ok()
        .flatten()
        .map(|ext| {
            ext.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    x509_parser::extensions::GeneralName::URI(u) => Some(u.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `leaf` names `issuer`'s subject as its issuer.
pub fn issued_by(leaf: &[u8], issuer: &[u8]) -> bool {
    let (_, l) = x509_parser::parse_x509_certificate(leaf).expect("X.509 leaf");
    let (_, i) = x509_parser::parse_x509_certificate(issuer).expect("X.509 issuer");
    l.issuer() == i.subject() && l.verify_signature(Some(i.public_key())).is_ok()
}

/// The serial number (hex, lowercase, no separators) as Envoy's `/certs` shows it.
pub fn serial_hex(der: &[u8]) -> String {
    let (_, c) = x509_parser::parse_x509_certificate(der).expect("X.509");
    c.raw_serial().iter().map(|b| format!("{b:02x}")).collect()
}
