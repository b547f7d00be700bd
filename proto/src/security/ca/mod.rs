//! Shoal's certificate authority, as istiod's: the wire API agents call and (I/O-free)
//! the signing material, CSR checks, issuance and rotation decisions. The edge serves it
//! (`shoal_edge::ca`) and reads the material from files or Kubernetes.
//!
//! - [`api`]: `istio.v1.auth.IstioCertificateService` messages and names.

pub mod api;
