//! TLS for ADS (istiod's port 15012): the serving certificate and the mesh root come from
//! `watch` channels, so a renewed certificate (the CA renews it at half-life) or a new
//! root is served from the next handshake on, without a restart.
//!
//! ```text
//!  watch<CertifiedKey> ──► server::WatchedCert (ResolvesServerCert) ──┐
//!  watch<RootCertStore> ─► server::WatchedClientVerifier (optional ───┤► ServerConfig (h2)
//!                          client certificate)                        │
//!  TcpListener ──► incoming: a task per handshake (timeout) ──► TlsConn { PeerInfo } ──► tonic
//!  relays: client::relay_config ── the same CertifiedKey as client certificate; the owner
//!          must present the edge SPIFFE ID under the mesh root
//! ```
//!
//! - [`server`]: the server config; [`incoming`]: the accept loop; [`peer`]: what a
//!   verified certificate names; [`client`]: the relay's mTLS client; [`files`]: PEM files
//!   as the certificate source, re-read when they change; [`keys`]: PEM to rustls keys.

pub mod client;
pub mod files;
pub mod incoming;
pub mod keys;
pub mod peer;
pub mod server;

use rustls::RootCertStore;
use rustls::sign::CertifiedKey;
use std::sync::Arc;
use tokio::sync::watch;

pub use incoming::{PeerConn, PeerInfo, TlsConn};

/// Where a TLS listener gets its certificate and the mesh root from. Both are watched: a
/// new value is used from the next handshake on.
#[derive(Clone)]
pub struct TlsMaterial {
    /// The certificate (chain, leaf first) and key this edge serves and relays with. It
    /// carries the edge's SPIFFE ID as a URI SAN for relays between edges.
    pub cert: watch::Receiver<Arc<CertifiedKey>>,
    /// The mesh root(s): client certificates and other edges are verified against them.
    /// Empty: no client certificate is asked for and no relay is made over TLS.
    pub roots: watch::Receiver<Arc<RootCertStore>>,
}

impl std::fmt::Debug for TlsMaterial {
    // The key stays out of logs: only the shape is shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("cert_chain_len", &self.cert.borrow().cert.len())
            .field("roots", &self.roots.borrow().len())
            .finish_non_exhaustive()
    }
}

/// The crypto provider every TLS config here uses (ring, as the rest of the workspace).
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

#[cfg(test)]
pub(crate) mod tests;
