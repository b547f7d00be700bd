//! State shared by the ADS service, the dispatcher and every stream task. It depends on
//! none of them, so they depend on it and not on each other.

use super::config::XdsConfig;
use super::metrics::Metrics;
use super::ownership::{Placement, Relays};
use super::registry::Registry;
use crate::convergence::Ledger;
use crate::placement::Pacer;
use crate::push_queue::{PushEvent, PushQueue};
use crate::xds::Generator;
use shoal_proto::push_context::PushContext;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use tokio::sync::{Semaphore, watch};

/// State shared by the service, the dispatcher and every stream task.
pub(crate) struct Shared {
    pub config: XdsConfig,
    pub generator: Arc<Generator>,
    pub snapshots: watch::Receiver<Arc<PushContext>>,
    pub registry: Registry,
    pub queue: Arc<PushQueue<u64, PushEvent>>,
    pub throttle: Arc<Semaphore>,
    pub streams: Arc<Semaphore>,
    pub metrics: Metrics,
    /// Set once: every stream closes with UNAVAILABLE and new ones are refused.
    pub draining: watch::Sender<bool>,
    /// Set once the edge starts draining: new streams are refused while the ones held
    /// are handed off at a pace.
    pub refusing: AtomicBool,
    /// New streams per second ([`XdsConfig::max_requests_per_second`]); `None`: no limit.
    pub admission: Option<Mutex<Pacer>>,
    /// First responses generated at once ([`XdsConfig::initial_throttle`]).
    pub initial: Arc<Semaphore>,
    /// Who owns which proxy; unset: this edge serves every proxy that reaches it.
    pub placement: OnceLock<Placement>,
    pub relays: Relays,
    /// How relays dial owners (mTLS as the edge identity); unset: this edge does not
    /// relay (an owner takes a relay only over mTLS from an edge).
    pub relay_tls: OnceLock<crate::tls::client::RelayConnector>,
    /// The newest snapshot version the puller knows exists, pulled or not; unset: only
    /// what is held is known.
    pub announced: OnceLock<Arc<AtomicU64>>,
    /// Where tunneled connections go: each listener's server.
    pub tunnels: super::tunnel::inbox::Inboxes,
    /// Per-revision convergence ([`XdsConfig::push_status_revisions`] revisions).
    pub convergence: Arc<Ledger>,
}

impl Shared {
    /// The newest snapshot.
    pub fn latest(&self) -> Arc<PushContext> {
        self.snapshots.borrow().clone()
    }

    /// Whether snapshot `version` is known to exist (announced, or the store's latest)
    /// though this edge may not hold it yet.
    pub fn knows_of(&self, version: u64) -> bool {
        self.announced
            .get()
            .is_some_and(|a| a.load(Ordering::Acquire) >= version)
    }
}
