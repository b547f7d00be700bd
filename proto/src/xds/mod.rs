//! The xDS contracts between an edge and the proxies it serves, without protobuf: the
//! type URLs of the resources a sidecar subscribes to, and what a proxy's `Node` says
//! about it (node ID and metadata keys, as Istio's agent sends them), and the proxy model
//! read from it.
//!
//! The edge reads these from Envoy's messages; the loadtest writes them as a simulated
//! Istio agent. Both take them from here, so they cannot drift apart.

pub mod node_metadata;
pub mod proxy;
pub mod types;

pub use proxy::{NodeMetadata, Proxy, ProxyKind};
