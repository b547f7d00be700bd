//! PEM files as the certificate source (`--tls-cert-file`, `--tls-key-file`,
//! `--tls-ca-file`), as istiod takes custom certificates for its DNS names: read at start,
//! re-read when their content changes (a mounted Secret is swapped in place), so a renewed
//! certificate is served without a restart. A change that does not load is reported and
//! the certificate served so far is kept.

use super::TlsMaterial;
use super::keys::{KeyError, certified_key, root_store};
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tracing::{info, warn};

/// Why the files do not make a certificate. Never carries key material.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

/// The certificate, its key and (optionally) the mesh root, as files.
#[derive(Clone, Debug)]
pub struct CertFiles {
    /// PEM chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM root(s) client certificates and other edges are verified against; none: no
    /// client certificates and no relays over TLS.
    pub ca: Option<PathBuf>,
}

type Loaded = (Arc<CertifiedKey>, Arc<RootCertStore>);

impl CertFiles {
    fn read(path: &Path) -> Result<Vec<u8>, FilesError> {
        std::fs::read(path).map_err(|source| FilesError::Read {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The files' bytes, to notice a change without parsing.
    fn contents(&self) -> Result<Vec<Vec<u8>>, FilesError> {
        let mut all = vec![Self::read(&self.cert)?, Self::read(&self.key)?];
        if let Some(ca) = &self.ca {
            all.push(Self::read(ca)?);
        }
        Ok(all)
    }

    /// Reads and checks the files.
    pub fn load(&self) -> Result<Loaded, FilesError> {
        let invalid = |path: &Path, reason: String| FilesError::Invalid {
            path: path.to_path_buf(),
            reason,
        };
        let certified = certified_key(&Self::read(&self.cert)?, &Self::read(&self.key)?).map_err(
            |e| match e {
                KeyError::Chain(reason) => invalid(&self.cert, reason),
                KeyError::Key(reason) => invalid(
                    &self.key,
                    format!("{reason} (certificate {})", self.cert.display()),
                ),
            },
        )?;
        let roots = match &self.ca {
            None => Arc::new(RootCertStore::empty()),
            Some(ca) => {
                let ders: Vec<CertificateDer<'static>> =
                    CertificateDer::pem_slice_iter(&Self::read(ca)?)
                        .collect::<Result<_, _>>()
                        .map_err(|e| invalid(ca, format!("not PEM certificates: {e}")))?;
                if ders.is_empty() {
                    return Err(invalid(ca, "holds no CERTIFICATE".into()));
                }
                root_store(ders).map_err(|reason| invalid(ca, reason))?
            }
        };
        Ok((certified, roots))
    }

    /// Loads the files and returns them as [`TlsMaterial`], with the task that re-reads
    /// them every `every` until `stop` resolves.
    pub fn watch(
        self,
        every: Duration,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(TlsMaterial, impl Future<Output = ()> + Send + 'static), FilesError> {
        let mut seen = self.contents()?;
        let (cert, roots) = self.load()?;
        let (cert_tx, cert_rx) = watch::channel(cert);
        let (roots_tx, roots_rx) = watch::channel(roots);
        let task = async move {
            let mut stop = std::pin::pin!(stop);
            loop {
                tokio::select! {
                    _ = &mut stop => return,
                    _ = tokio::time::sleep(every) => {}
                }
                let now = match self.contents() {
                    Ok(c) => c,
                    Err(e) => {
                        warn!(error = %e, "TLS files unreadable; serving the certificate loaded before");
                        continue;
                    }
                };
                if now == seen {
                    continue;
                }
                match self.load() {
                    Ok((cert, roots)) => {
                        seen = now;
                        cert_tx.send_replace(cert);
                        roots_tx.send_if_modified(|old| {
                            let changed = old.roots != roots.roots;
                            *old = roots;
                            changed
                        });
                        info!(cert = %self.cert.display(), "TLS certificate reloaded");
                    }
                    Err(e) => {
                        seen = now;
                        warn!(error = %e, "TLS files changed but do not load; serving the certificate loaded before");
                    }
                }
            }
        };
        Ok((
            TlsMaterial {
                cert: cert_rx,
                roots: roots_rx,
            },
            task,
        ))
    }
}
