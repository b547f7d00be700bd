//! The edge tier: holds proxies' ADS streams, pulls snapshots, runs the push queue and
//! generates xDS.
//!
//! ```text
//! shoal.snapshot / shoal:latest ──► snapshot::SnapshotPuller ──watch──► ads::XdsServer (new streams)
//!                                            │ SnapshotUpdate
//!                                            ▼
//!                             ads dispatcher ──► push_queue ──► per-stream state machine ──► Envoy
//!                                                                    │
//!                                                             xds::Generator (cached per scope)
//! ```

pub mod ads;
pub mod authn;
pub mod ca;
pub mod cli;
pub mod config_dump;
pub mod convergence;
pub mod csds;
pub mod jwks;
pub mod kubernetes;
pub mod membership;
pub mod placement;
pub mod proxy;
pub mod push_queue;
mod rebalance;
mod run;
pub mod security;
pub mod snapshot;
pub mod tls;
pub mod xds;

pub use run::{BoundEdge, Edge, EdgeConfig, EdgeError, HandoffConfig, Listen, SecureListen};
