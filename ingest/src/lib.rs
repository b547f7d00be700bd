//! Shoal's ingest tier: serves a directory of Kubernetes and Istio YAML to the mesh.
//!
//! ```text
//!  config dir ──notify──► registry ──► ConfigStore ──handler──► KV writer ──► ConfigKv
//!                         (parse,                                   │ revision
//!                          validate,                                ▼
//!                          reject)                       debounce ──► Bus (shoal.push)
//! ```
//!
//! - [`source`]: the [`source::Source`] trait and the sink every source feeds: objects
//!   stamped with their origin, KV keys owned by cluster and source, HasSynced.
//! - [`registry`]: the directory source — files to objects, rejections kept out.
//! - `sync`: store events to KV writes (each push sent only after its write) and the
//!   start-up reconciliation.
//! - [`debounce`]: Istio's debounce, exactly.
//! - `publish`: push requests onto the bus, retried while it is unavailable.
//! - [`Ingest`]: the tasks wired behind the `ConfigKv` and `Bus` traits, so the split
//!   `ingest` binary ([`cli`]) runs them on NATS and the all-in-one `shoal` in process.

pub mod cli;
mod config;
pub mod debounce;
pub mod kubernetes;
mod metrics;
mod publish;
pub mod registry;
mod retry;
mod service;
pub mod source;
mod sync;
#[cfg(test)]
mod testing;

pub use config::IngestConfig;
pub use service::{Ingest, IngestError, IngestHandle};
pub use shoal_infra::retry::RetryConfig;
pub use sync::SyncError;

use prometheus_client::registry::Registry;
use shoal_infra::runtime::DrainWatch;
use shoal_proto::transport::{Bus, ConfigKv};
use std::future::Future;
use std::sync::Arc;

/// Registers the ingest's metrics and returns its handle (readiness, rejections) and the
/// future that runs it until `drain` starts — shorthand for [`Ingest::new`] +
/// [`Ingest::handle`] + [`Ingest::run`].
pub fn run(
    config: IngestConfig,
    kv: Arc<dyn ConfigKv>,
    bus: Arc<dyn Bus>,
    registry: &mut Registry,
    drain: DrainWatch,
) -> (
    IngestHandle,
    impl Future<Output = Result<(), IngestError>> + Send + 'static,
) {
    let ingest = Ingest::new(config, kv, bus, registry);
    (ingest.handle(), ingest.run(drain))
}
