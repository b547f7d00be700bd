//! Shoal's test support: what tests, benches and the loadtest share, dev-only.
//!
//! - [`meshgen`]: deterministic synthetic meshes, as the Kubernetes and Istio YAML a user
//!   would write.
//! - [`fixtures`]: the snapshot chunks and PushContext of a meshgen mesh, written directly
//!   (proven equal to what the builder builds from the YAML by `builder/tests/fixtures.rs`).
//! - [`jwt`]: a test token issuer: Kubernetes-shaped service-account tokens, its JWKS and
//!   OIDC discovery on a loopback server.
//!
//! It depends on `proto` (and ring, axum, tokio for the issuer) but on no tier, so a
//! tier's tests can use it without depending on another tier. Only dev-dependencies and the `loadtest` tool may depend on it.

pub mod fixtures;
pub mod jwt;
pub mod meshgen;
