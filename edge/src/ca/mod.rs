//! The edge's certificate authority: Istio's `CreateCertificate` served over gRPC and
//! the sources of its signing material. The CA logic itself is I/O-free in
//! `shoal_proto::security::ca`.
//!
//! ```text
//!  source (plug-in dir polled │ istio-ca-secret dir │ memory │ Secrets via the API server)
//!     ──watch<Arc<SigningMaterial>>──► CaService
//!                                 └──► root_cert: istio-ca-root-cert ConfigMap in every namespace
//! ```
//!
//! - [`service`]: [`CaService`], the unary gRPC service.
//! - [`credentials`]: what a caller presents (token; certificates from the TLS listener).
//! - [`source`]: where signing material comes from and how it rotates.
//! - [`root_cert`]: the mesh root published in every namespace.

pub mod credentials;
mod metrics;
pub mod root_cert;
pub mod service;
pub mod source;

pub use credentials::request_credentials;
pub use service::CaService;

#[cfg(test)]
mod tests;
