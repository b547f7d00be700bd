//! [`XdsServer`]: the ADS gRPC service, the push dispatcher and `/debug/syncz`.

use super::config::XdsConfig;
use super::metrics::Metrics;
use super::ownership::Placement;
use super::registry::Registry;
pub use super::service::AdsService;
use super::shared::Shared;
use super::status::TypeStatus;
use super::tunnel::{EdgeConn, Origin, TunnelService};
use crate::convergence::{Ledger, PushStatus};
use crate::csds::{self, Access, ConnectedProxies, CsdsService};
use crate::membership::Ring;
use crate::placement::Pacer;
use crate::push_queue::{PushEvent, PushQueue};
use crate::snapshot::SnapshotUpdate;
use crate::tls::PeerInfo;
use crate::tls::TlsMaterial;
use crate::tls::client::RelayConnector;
use crate::xds::Generator;
use futures::Stream;
use shoal_proto::change::ChangeSet;
use shoal_proto::push_context::PushContext;
use shoal_proto::security::Authenticator;
use shoal_proto::security::authn::Anonymous;
use shoal_proto::xds::Proxy;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Semaphore, mpsc, watch};
use tonic::transport::server::Connected;
use tracing::Instrument;

/// The edge's ADS server. Cheap to clone.
#[derive(Clone)]
pub struct XdsServer {
    pub(crate) shared: Arc<Shared>,
}

impl XdsServer {
    /// `snapshots` holds the newest PushContext (an empty one, version 0, until the first
    /// snapshot arrives); streams read it for requests. Metrics go into `registry`.
    pub fn new(
        config: XdsConfig,
        generator: Arc<Generator>,
        snapshots: watch::Receiver<Arc<PushContext>>,
        registry: &mut prometheus_client::registry::Registry,
    ) -> Self {
        let admission = (config.max_requests_per_second > 0.0).then(|| {
            let rate = config.max_requests_per_second;
            // A second's worth at once: a burst of reconnects is admitted together.
            Mutex::new(Pacer::new(rate, rate.ceil() as usize))
        });
        let initial = config.initial_throttle.max(1);
        let queue = Arc::new(PushQueue::new());
        let shared = Shared {
            convergence: Arc::new(Ledger::new(config.push_status_revisions)),
            throttle: Arc::new(Semaphore::new(config.push_throttle.max(1))),
            streams: Arc::new(Semaphore::new(config.max_streams)),
            config,
            generator,
            snapshots,
            registry: Registry::default(),
            metrics: Metrics::new(registry, &queue),
            queue,
            draining: watch::Sender::new(false),
            refusing: Default::default(),
            admission,
            initial: Arc::new(Semaphore::new(initial)),
            placement: Default::default(),
            relays: Default::default(),
            relay_tls: Default::default(),
            announced: Default::default(),
            tunnels: Default::default(),
        };
        XdsServer {
            shared: Arc::new(shared),
        }
    }

    /// The plaintext gRPC service (istiod's 15010) to mount on a tonic server: it proves
    /// nothing, every stream is anonymous, and it takes no relay.
    pub fn ads_service(&self) -> AdsService {
        AdsService::new(self.shared.clone(), Arc::new(Anonymous), false)
    }

    /// The secure gRPC service (istiod's 15012), to serve over [`crate::tls::incoming`]:
    /// every stream is authenticated by `authenticator` from its bearer token and the
    /// client certificate the TLS handshake verified; one that proves nothing is refused
    /// UNAUTHENTICATED. Relays are taken here from other edges.
    pub fn secure_ads_service(&self, authenticator: Arc<dyn Authenticator>) -> AdsService {
        AdsService::new(self.shared.clone(), authenticator, true)
    }

    /// The connections for the server of the listener `origin` that accepts `conns`:
    /// each read for its first stream's proxy and served here or tunneled to the proxy's
    /// owner, and the connections other edges tunnel to this listener. A connection from
    /// another edge (relays, tunnels) is served as it is.
    pub fn incoming<L, S>(
        &self,
        origin: Origin,
        conns: S,
    ) -> impl Stream<Item = std::io::Result<EdgeConn<L>>> + Send + 'static
    where
        L: Connected<ConnectInfo = PeerInfo> + AsyncRead + AsyncWrite + Unpin + Send + 'static,
        S: Stream<Item = std::io::Result<L>> + Send + 'static,
    {
        super::tunnel::incoming(self.shared.clone(), origin, conns)
    }

    /// CSDS for the plaintext listener (istiod's 15010): anyone may ask, as Istio answers
    /// there.
    pub fn csds_service(&self) -> CsdsService {
        csds::service(Arc::new(self.clone()), Access::Anyone)
    }

    /// CSDS for the secure listener: only an identity of the control plane's namespace
    /// (the edges' own, [`XdsConfig::edge_identity`]), proven to `authenticator`, may ask.
    pub fn secure_csds_service(&self, authenticator: Arc<dyn Authenticator>) -> CsdsService {
        let access = Access::ControlPlane {
            authenticator,
            system_namespace: self.shared.config.edge_identity.namespace.clone(),
        };
        csds::service(Arc::new(self.clone()), access)
    }

    /// The endpoint other edges tunnel proxies' connections to, for the secure listener's
    /// server (a tunnel is taken only over mTLS from an edge).
    pub fn tunnel_service(&self) -> TunnelService {
        TunnelService::new(self.shared.clone())
    }

    /// Relays streams to their owners over mTLS with `material` (this edge's certificate,
    /// which must name [`XdsConfig::edge_identity`], and the mesh root the owner is
    /// verified against). Set once; without it this edge serves every proxy itself.
    pub fn relay_over_tls(&self, material: &TlsMaterial) -> Result<(), rustls::Error> {
        let config =
            crate::tls::client::relay_config(material, self.shared.config.edge_identity.clone())?;
        let _ = self.shared.relay_tls.set(RelayConnector {
            config,
            // An owner that is down refuses at once; one in a connection storm can take
            // seconds to finish a TLS handshake, and a relay that gives up serves its
            // proxy here only to hand it off later.
            connect_timeout: std::time::Duration::from_secs(5),
        });
        Ok(())
    }

    /// Pushes every [`SnapshotUpdate`] to the streams it concerns, until `shutdown`
    /// resolves or `updates` closes; then closes every stream with UNAVAILABLE (so a
    /// tonic `serve_with_shutdown` on the same signal can finish) and returns.
    ///
    /// The snapshot watch must be advanced before its update is sent here.
    pub async fn run_dispatcher(
        &self,
        updates: mpsc::Receiver<SnapshotUpdate>,
        shutdown: impl Future<Output = ()>,
    ) {
        self.shared
            .run_dispatcher(updates, shutdown)
            .instrument(tracing::info_span!("xds_dispatcher"))
            .await
    }

    /// Pushes the latest snapshot again, as `changes`, to the streams they concern: for
    /// what generation reads beside the snapshot (the JWKS the edge fetches).
    pub fn push_changes(&self, changes: ChangeSet) {
        let push = self.shared.latest();
        self.shared
            .dispatch(PushEvent::new(push, Arc::new(changes)));
    }

    /// `/debug/push_status?revision=R`: how far config revision `R` (the latest pushed
    /// without one) reached the proxies it concerned here. `Err`: the query is not one.
    pub fn push_status(&self, revision: Option<&str>) -> Result<PushStatus, String> {
        let asked = match revision.map(str::trim) {
            None | Some("") | Some("latest") => None,
            Some(r) => Some(r.parse::<u64>().map_err(|_| {
                format!("revision {r:?}: expected a config revision (a number) or \"latest\"")
            })?),
        };
        Ok(self
            .shared
            .convergence
            .status(asked, self.shared.latest().version()))
    }

    /// `/debug/syncz`: per connected proxy, its identity and per-type sync state.
    pub fn syncz(&self) -> serde_json::Value {
        self.shared.registry.syncz()
    }

    /// Owns proxies by `ring` as member `me`: a stream whose proxy another edge owns is
    /// relayed there. Set once; without it every proxy is served here.
    pub fn own_by_ring(&self, me: impl Into<String>, ring: watch::Receiver<Arc<Ring>>) {
        let _ = self.shared.placement.set(Placement {
            me: me.into(),
            ring,
        });
    }

    /// Follows the newest snapshot version the puller knows exists: a proxy reporting a
    /// snapshot this edge knows of but has not pulled yet is sent back rather than given
    /// an older config.
    pub fn follow_announced(&self, announced: Arc<std::sync::atomic::AtomicU64>) {
        let _ = self.shared.announced.set(announced);
    }

    /// Streams relayed to their owners now.
    pub fn relayed(&self) -> usize {
        self.shared.relays.len()
    }

    /// The IDs of the proxies connected here.
    pub fn proxy_ids(&self) -> Vec<String> {
        self.shared.registry.proxy_ids()
    }

    /// Streams currently connected.
    pub fn connected(&self) -> usize {
        self.shared.registry.len()
    }
}

/// CSDS reads the proxies from the registry of streams.
impl ConnectedProxies for XdsServer {
    fn visit(&self, visit: &mut dyn FnMut(&Proxy, &[Arc<TypeStatus>])) {
        self.shared.registry.visit_proxies(visit)
    }
}

mod config_dump;
pub use config_dump::ConfigDumpError;

#[cfg(test)]
mod config_dump_tests;
#[cfg(test)]
mod push_status_tests;
#[cfg(test)]
mod tests;
