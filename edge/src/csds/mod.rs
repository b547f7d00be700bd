//! CSDS, Envoy's `envoy.service.status.v3.ClientStatusDiscoveryService`, on every edge:
//! for each proxy connected here, each xDS type its stream watches, the version last
//! sent, and whether the proxy ACKed it, NACKed it (with Envoy's words) or has yet to
//! answer. Resource contents are never included, so that an edge holding 100k proxies
//! answers in one message.
//!
//! ```text
//!  ads registry: each stream publishes its `Statuses` after every step
//!        │ ConnectedProxies (XdsServer)
//!        ▼
//!  service ─► access (who asks) ─► answer: matcher (node_matchers) ─► status (ClientConfig)
//! ```
//!
//! Imports run down this list:
//!
//! - [`service`]: [`Csds`], the gRPC methods (tonic's generated server around it):
//!   `FetchClientStatus` (unary) and `StreamClientStatus` (one answer per request);
//! - [`access`]: who may ask: anyone on the plaintext listener (istiod's 15010), an
//!   identity of the control plane's namespace on the secure one;
//! - [`answer`]: one request's answer, without I/O;
//! - [`matcher`]: `node_matchers` on the node ID;
//! - [`status`]: one stream's sync state as Envoy's `ClientConfig`;
//! - [`source`]: [`ConnectedProxies`], what CSDS reads the proxies from;
//! - [`error`]: [`CsdsError`], and the gRPC status of each.

mod access;
mod answer;
mod error;
mod matcher;
mod service;
mod source;
mod status;

pub use access::Access;
pub use answer::answer;
pub use error::{CsdsError, Result};
pub use matcher::NodeFilter;
pub use service::{Csds, CsdsService, MAX_REQUEST_BYTES, MAX_RESPONSE_BYTES, service};
pub use source::ConnectedProxies;
pub use status::{client_config, type_config};

#[cfg(test)]
mod tests;
