//! Shoal's test support: what tests, benches and the loadtest share, dev-only.
//!
//! - [`meshgen`]: deterministic synthetic meshes, as the Kubernetes and Istio YAML a user
//!   would write.
//!
//! It depends on `proto` alone, so a tier's tests can use it without depending on another
//! tier. Only dev-dependencies and the `loadtest` tool may depend on it.

pub mod meshgen;
