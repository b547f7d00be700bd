//! xDS generation: CDS, EDS, LDS, RDS (and SDS for gateways) for a proxy from a
//! PushContext.
//!
//! Pure functions of (type, proxy, SidecarScope, PushContext). Resources that depend only
//! on the scope and the snapshot are generated and encoded once and shared (`Arc`) by
//! every proxy with that scope.
//!
//! ```text
//!  Generator::generate(type, proxy, push, names)
//!     │ generator = table[(proxy.kind, type)]   generator/table.rs
//!     │ scope = push.sidecar_scope(ns, labels)
//!     ├─ generator/sidecar/  CDS, EDS, LDS, RDS, each with its own cache key,
//!     │  built by clusters.rs, endpoints.rs, listeners.rs, routes.rs; encoded once
//!     │  and shared as Arc (cache.rs)
//!     └─ generator/router/   LDS, RDS, SDS for gateways, built by gateway/ from the
//!        Gateways that select the router (CDS and EDS are the sidecar's)
//! ```

/// The xDS type URLs, from proto's contracts (the stream state machines name them here).
pub use shoal_proto::xds::types;

use envoy_types::pb::google::protobuf::Any;

/// One encoded resource, shared between proxies.
#[derive(Clone, Debug, PartialEq)]
pub struct XdsResource {
    pub name: String,
    pub resource: Any,
    /// A hash of the encoded resource: equal hashes mean "unchanged, do not resend".
    /// A content hash (BLAKE3), so that every edge and every build gives a resource the
    /// same Delta version, and a proxy that moves between edges resends nothing.
    pub hash: u64,
}

impl XdsResource {
    pub fn new(name: String, type_url: &str, value: Vec<u8>) -> Self {
        XdsResource {
            name,
            hash: content_hash(&value),
            resource: Any {
                type_url: type_url.to_string(),
                value,
            },
        }
    }
}

/// The first 64 bits of the BLAKE3 hash of `bytes`: stable across processes and builds.
pub fn content_hash(bytes: &[u8]) -> u64 {
    let digest = blake3::hash(bytes);
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest.as_bytes()[..8]);
    u64::from_le_bytes(first)
}

mod cache;
pub mod clusters;
pub mod endpoints;
pub mod gateway;
mod generator;
pub mod listeners;
pub mod routes;
pub mod security;
pub mod util;

#[cfg(test)]
mod envoy_check;
#[cfg(test)]
pub(crate) mod testing;

pub use cache::{CacheStats, TypeStats};
pub use clusters::{ClusterDefaults, ClusterOptions};
pub use generator::{GenerateError, Generator, GeneratorConfig};
