//! Shoal's I/O-free core.
//!
//! Everything the tiers agree on lives here and knows nothing of NATS, Redis, kube or
//! tonic:
//!
//! ```text
//!  config::parse ──► Config ──► ConfigStore ──► PushRequest (debounced, merged)
//!                                   │
//!                      builder: model::build ──► PushContext ──► snapshot chunks
//!                                                                      │
//!                      edge:  snapshot chunks ──► PushContext ──► SidecarScope ──► xDS
//! ```
//!
//! - [`analyze`]: `istioctl analyze` findings over a set of parsed objects.
//! - [`config`]: the Kubernetes and Istio objects users write, parsed and validated.
//! - [`store`]: the ConfigStore / ConfigStoreCache of Istio's config model.
//! - [`change`]: `ChangeSet`, the one change type every hop carries, and Istio's Merge.
//! - [`push`]: `PushRequest`, a change set and the config revision it covers.
//! - [`model`]: the mesh model derived from config (services, endpoints).
//! - [`push_context`]: the indexed, immutable view one push works from, and `SidecarScope`.
//! - [`snapshot`]: how a PushContext is split into content-addressed chunks, the pages that
//!   list them and a small root manifest.
//! - [`security`]: identities, the `Authenticator` trait and the authorization function.
//! - [`transport`]: the `Bus`, `ConfigKv` and `SnapshotStore` traits and their wire types.
//! - [`xds`]: the xDS contracts with proxies: type URLs, node ID and node metadata keys.

pub mod analyze;
pub mod change;
pub mod config;
pub mod model;
pub mod push;
pub mod push_context;
pub mod security;
pub mod snapshot;
pub mod store;
pub mod transport;
pub mod xds;
