//! Shoal's certificate authority, as istiod's: the wire API agents call and, I/O-free,
//! the signing material, CSR checks, issuance and rotation decisions. The edge serves it
//! (`shoal_edge::ca`) and reads the material from files.
//!
//! ```text
//!  PluginCerts (cacerts) ─┐
//!  istio-ca-secret PEM ───┼─► SigningMaterial ─► sign_csr(csr, caller's SpiffeId) ─► chain
//!  self_signed(td) ───────┘        │            issue_serving(dns, spiffe) ─► ServingCert
//!                                  └─ rotation: when to renew / re-read
//! ```
//!
//! - [`api`]: `istio.v1.auth.IstioCertificateService` messages and names.
//! - [`material`]: [`SigningMaterial`] and its sources' validation.
//! - [`csr`]: CSR parsing and signature check, bounded.
//! - [`issue`]: workload and serving certificates, [`CertPolicy`].
//! - [`rotation`]: renewal decisions.
//! - [`error`]: [`CaError`], with Istio's error kinds.

pub mod api;
pub mod csr;
pub mod error;
pub mod issue;
mod key;
pub mod material;
mod pem;
pub mod rotation;

#[cfg(test)]
mod tests;

pub use error::{CaError, CaErrorKind};
pub use issue::{
    CLOCK_SKEW_GRACE, CertPolicy, DEFAULT_WORKLOAD_CERT_TTL, MAX_WORKLOAD_CERT_TTL, ServingCert,
};
pub use material::{DEFAULT_SELF_SIGNED_ROOT_TTL, MaterialKind, PluginCerts, SigningMaterial};
