//! A `CertifiedKey` and a root store from PEM/DER, for every certificate source (files,
//! the CA). Errors never carry key bytes.

use super::provider;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use std::sync::Arc;

/// Which part of the material is unusable, and why.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{0}")]
    Chain(String),
    #[error("{0}")]
    Key(String),
}

/// The chain (PEM, leaf first) and its private key (PKCS#8, PKCS#1 or SEC1 PEM).
pub fn certified_key(chain_pem: &[u8], key_pem: &[u8]) -> Result<Arc<CertifiedKey>, KeyError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| KeyError::Chain(format!("not PEM certificates: {e}")))?;
    if chain.is_empty() {
        return Err(KeyError::Chain("holds no CERTIFICATE".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| KeyError::Key(format!("no usable private key: {e}")))?;
    let signer = provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| KeyError::Key(format!("unsupported private key: {e}")))?;
    let certified = CertifiedKey::new(chain, signer);
    certified
        .keys_match()
        .map_err(|e| KeyError::Key(format!("does not match the certificate: {e}")))?;
    Ok(Arc::new(certified))
}

/// A root store of `roots` (DER).
pub fn root_store<'a>(
    roots: impl IntoIterator<Item = CertificateDer<'a>>,
) -> Result<Arc<RootCertStore>, String> {
    let mut store = RootCertStore::empty();
    for root in roots {
        store
            .add(root.into_owned())
            .map_err(|e| format!("not a usable root: {e}"))?;
    }
    Ok(Arc::new(store))
}
