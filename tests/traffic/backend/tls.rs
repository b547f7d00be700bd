//! TLS for the HTTP backend: a throwaway CA made for one test, the server certificate it
//! signs (with the SANs the test chooses), a client certificate for mutual TLS, and the
//! rustls server config a backend terminates TLS with. The CA and client files are
//! written where the test's Envoy reads them, as a DestinationRule names files on the
//! proxy.

use rcgen::{BasicConstraints, Certificate, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ServerConnection, WebPkiClientVerifier};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct TestPki {
    issuer: Issuer<'static, KeyPair>,
    ca: CertificateDer<'static>,
    /// `ca.pem`, `client.pem` and `client-key.pem`.
    pub dir: PathBuf,
}

impl TestPki {
    /// A new CA, its certificate in `dir/ca.pem`, and a client certificate it signs in
    /// `dir/client.pem` and `dir/client-key.pem`.
    pub fn new(dir: &Path) -> TestPki {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "shoal traffic test CA");
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        std::fs::create_dir_all(dir).expect("mkdir pki");
        std::fs::write(dir.join("ca.pem"), cert.pem()).expect("write ca.pem");
        let pki = TestPki {
            issuer: Issuer::new(params, key),
            ca: cert.der().clone(),
            dir: dir.to_path_buf(),
        };
        let (client, client_key) = pki.issue(&["client.traffic.svc.cluster.local"]);
        std::fs::write(dir.join("client.pem"), client.pem()).expect("client.pem");
        std::fs::write(dir.join("client-key.pem"), client_key.serialize_pem())
            .expect("client-key.pem");
        pki
    }

    pub fn path(&self, file: &str) -> String {
        self.dir.join(file).display().to_string()
    }

    /// A certificate for `sans`, signed by the CA, and its key.
    fn issue(&self, sans: &[&str]) -> (Certificate, KeyPair) {
        let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
        let params = CertificateParams::new(sans).expect("leaf params");
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign leaf");
        (cert, key)
    }

    /// A server presenting a certificate for `sans`; with `client_auth`, it requires a
    /// client certificate signed by the CA.
    pub fn server_config(&self, sans: &[&str], client_auth: bool) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("TLS versions");
        let builder = if client_auth {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(self.ca.clone()).expect("CA root");
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .expect("client verifier");
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let (cert, key) = self.issue(sans);
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        Arc::new(
            builder
                .with_single_cert(vec![cert.der().clone()], key)
                .expect("server certificate"),
        )
    }
}

impl TestPki {
    /// A client trusting only this CA (no client certificate), as an application that
    /// originates TLS itself and sends it through the sidecar untouched.
    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.clone()).expect("CA root");
        Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("TLS versions")
                .with_root_certificates(roots)
                .with_no_client_auth(),
        )
    }
}

/// `GET /` over TLS to `127.0.0.1:port` with SNI (and `Host`) `server_name`, verifying
/// the server's certificate for that name; the answer's `x-backend`. `Err` says what
/// failed (connect, handshake, no answer).
pub async fn get_backend(
    client: Arc<rustls::ClientConfig>,
    port: u16,
    server_name: &str,
) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let sock = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let name = rustls::pki_types::ServerName::try_from(server_name.to_string())
            .map_err(|e| format!("server name: {e}"))?;
        let mut tls = tokio_rustls::TlsConnector::from(client)
            .connect(name, sock)
            .await
            .map_err(|e| format!("TLS handshake for {server_name}: {e}"))?;
        let request = format!("GET / HTTP/1.1\r\nhost: {server_name}\r\n\r\n");
        tls.write_all(request.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        // The answer's head is enough (the backend keeps the connection open).
        let mut answer = Vec::new();
        let mut chunk = [0u8; 1024];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            match tls.read(&mut chunk).await {
                Ok(0) => break,
                Ok(n) => answer.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("read: {e}")),
            }
        }
        let answer = String::from_utf8_lossy(&answer).into_owned();
        answer
            .lines()
            .find_map(|l| l.strip_prefix("x-backend: "))
            .map(|b| b.trim().to_string())
            .ok_or_else(|| format!("no x-backend in the answer: {answer:?}"))
    };
    tokio::time::timeout(std::time::Duration::from_secs(5), exchange)
        .await
        .map_err(|_| "no answer within 5 s".to_string())?
}

/// What the handshake showed, as headers the backend echoes (`x-echo-x-tls-...`): the
/// SNI the client sent, and whether it presented a certificate.
pub fn handshake_headers(conn: &ServerConnection) -> Vec<(String, String)> {
    vec![
        (
            "x-tls-sni".into(),
            conn.server_name().unwrap_or("").to_string(),
        ),
        (
            "x-tls-client-cert".into(),
            if conn.peer_certificates().is_some_and(|c| !c.is_empty()) {
                "present"
            } else {
                "none"
            }
            .into(),
        ),
    ]
}
