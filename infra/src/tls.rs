//! TLS towards NATS and Redis: the files an operator names (a CA to verify the server
//! against, an optional client certificate and key), read and checked before connecting so
//! a bad file is an error naming it rather than a handshake failure later.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};

/// PEM files for a TLS client. Without `ca`, the server is verified against the system's
/// roots (a `tls://` / `rediss://` URL and nothing else).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// The files read and checked: PEM bytes, as the client libraries take them.
#[derive(Clone)]
pub struct TlsPem {
    pub ca: Option<Vec<u8>>,
    /// Certificate chain and private key, for mutual TLS.
    pub client: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for TlsPem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is never printed, and the certificates are not worth printing.
        f.debug_struct("TlsPem")
            .field("ca", &self.ca.as_ref().map(|_| "<pem>"))
            .field("client", &self.client.as_ref().map(|_| "<cert and key>"))
            .finish()
    }
}

/// A TLS file that cannot be used. `what` names the server (`NATS`, `Redis`).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{what} TLS {role} file {path}: {reason}")]
    File {
        what: &'static str,
        role: &'static str,
        path: String,
        reason: String,
    },
    #[error("{what} TLS: a client {given} was given without the client {missing}")]
    Pair {
        what: &'static str,
        given: &'static str,
        missing: &'static str,
    },
}

impl TlsFiles {
    pub fn is_empty(&self) -> bool {
        self.ca.is_none() && self.cert.is_none() && self.key.is_none()
    }

    /// Reads and checks every file: the CA holds at least one certificate, the client
    /// certificate and key come together and parse. The key's parse error never quotes it.
    pub fn load(&self, what: &'static str) -> Result<TlsPem, TlsError> {
        let ca = match &self.ca {
            Some(path) => {
                let pem = read(what, "CA", path)?;
                let certs = certificates(what, "CA", path, &pem)?;
                if certs == 0 {
                    return Err(file_error(what, "CA", path, "no certificate in it"));
                }
                Some(pem)
            }
            None => None,
        };
        let client = match (&self.cert, &self.key) {
            (Some(cert_path), Some(key_path)) => {
                let cert = read(what, "certificate", cert_path)?;
                if certificates(what, "certificate", cert_path, &cert)? == 0 {
                    return Err(file_error(
                        what,
                        "certificate",
                        cert_path,
                        "no certificate in it",
                    ));
                }
                let key = read(what, "key", key_path)?;
                PrivateKeyDer::from_pem_slice(&key).map_err(|e| {
                    let reason = match e {
                        rustls::pki_types::pem::Error::NoItemsFound => {
                            "no private key in it".to_owned()
                        }
                        _ => "not a PEM private key".to_owned(),
                    };
                    file_error(what, "key", key_path, &reason)
                })?;
                Some((cert, key))
            }
            (Some(_), None) => {
                return Err(TlsError::Pair {
                    what,
                    given: "certificate",
                    missing: "key",
                });
            }
            (None, Some(_)) => {
                return Err(TlsError::Pair {
                    what,
                    given: "key",
                    missing: "certificate",
                });
            }
            (None, None) => None,
        };
        Ok(TlsPem { ca, client })
    }
}

/// Whether rustls refused the handshake somewhere in `error`'s chain (client libraries
/// report it as an I/O error), so the message can say TLS failed rather than "I/O error".
pub fn refused(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        let io_inner = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref());
        if e.is::<rustls::Error>() || io_inner.is_some_and(|inner| inner.is::<rustls::Error>()) {
            return true;
        }
        next = e.source();
    }
    false
}

fn read(what: &'static str, role: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| file_error(what, role, path, &e.to_string()))
}

fn certificates(
    what: &'static str,
    role: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<usize, TlsError> {
    CertificateDer::pem_slice_iter(pem)
        .try_fold(0, |n, cert| cert.map(|_| n + 1))
        .map_err(|e| file_error(what, role, path, &format!("not PEM certificates ({e})")))
}

fn file_error(what: &'static str, role: &'static str, path: &Path, reason: &str) -> TlsError {
    TlsError::File {
        what,
        role,
        path: path.display().to_string(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_and_unpaired_files_are_named() {
        let files = TlsFiles {
            ca: Some("/nonexistent/ca.pem".into()),
            ..TlsFiles::default()
        };
        let error = files.load("NATS").unwrap_err().to_string();
        assert!(
            error.starts_with("NATS TLS CA file /nonexistent/ca.pem: "),
            "{error}"
        );

        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not pem").unwrap();
        let files = TlsFiles {
            ca: Some(empty.clone()),
            ..TlsFiles::default()
        };
        let error = files.load("Redis").unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "Redis TLS CA file {}: no certificate in it",
                empty.display()
            )
        );

        let files = TlsFiles {
            cert: Some(empty),
            ..TlsFiles::default()
        };
        let error = files.load("Redis").unwrap_err().to_string();
        assert_eq!(
            error,
            "Redis TLS: a client certificate was given without the client key"
        );
    }
}
