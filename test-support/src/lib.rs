//! Shoal's test support: what tests, benches and the loadtest share, dev-only.
//!
//! - [`meshgen`]: deterministic synthetic meshes, as the Kubernetes and Istio YAML a user
//!   would write.
//! - [`fixtures`]: the snapshot chunks and PushContext of a meshgen mesh, written directly
//!   (proven equal to what the builder builds from the YAML by `builder/tests/fixtures.rs`).
//! - [`tls`]: a certificate authority made at test time and the PEM files TLS servers and
//!   clients read.
//! - [`pki`]: a throwaway mesh CA for TLS tests (rcgen): roots, edge and workload
//!   certificates with SPIFFE IDs, as PEM and DER.
//! - [`jwt`]: a test token issuer: Kubernetes-shaped service-account tokens, its JWKS and
//!   OIDC discovery on a loopback server.
//!
//! Of Shoal it depends on `proto` alone (and on rcgen, tempfile, ring, axum and tokio for
//! the PKI and the issuer), so a tier's tests can use it without depending on another
//! tier. Only dev-dependencies and the `loadtest` tool may depend on it.

pub mod fixtures;
pub mod jwt;
pub mod meshgen;
pub mod pki;
pub mod tls;
