//! The edge's tasks wired together: snapshot puller → push dispatcher → ADS streams, the
//! membership heartbeat, and the gRPC server. Used by the `edge` binary (NATS and Redis)
//! and by the all-in-one `shoal` (in-process twins).

use crate::ads::tunnel::{Origin, plain_conns};
use crate::ads::{XdsConfig, XdsServer};
use crate::jwks::{JwksFetchConfig, JwksRefresher};
use crate::membership::{self, MembershipConfig, Ring};
use crate::placement;
use crate::rebalance::{self, RebalanceConfig};
use crate::snapshot::{PullerConfig, SnapshotPuller};
use crate::tls::TlsMaterial;
use crate::tls::incoming::HandshakeLimits;
use crate::xds::security::jwt::keys::JwksStore;
use crate::xds::{Generator, GeneratorConfig};
use prometheus_client::registry::Registry;
use shoal_infra::runtime::DrainWatch;
use shoal_proto::security::Authenticator;
use shoal_proto::transport::{Bus, Member, Membership, SnapshotStore};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{Instrument, error, info, info_span};

#[derive(Clone, Debug)]
pub struct EdgeConfig {
    /// This edge's ID in the membership ring (unique per replica).
    pub member_id: String,
    pub xds: XdsConfig,
    pub puller: PullerConfig,
    pub membership: MembershipConfig,
    /// Snapshot updates queued for the dispatcher before the puller waits.
    pub update_capacity: usize,
    pub handoff: HandoffConfig,
    /// Proxies are owned by ring: a stream that reaches a non-owner is relayed to its
    /// owner. Off: every edge serves whoever reaches it.
    pub own_by_ring: bool,
    /// How RequestAuthentications' `jwksUri`s are fetched.
    pub jwks: JwksFetchConfig,
    /// Generation defaults and the bounds of the generator's caches.
    pub generator: GeneratorConfig,
    /// The IP other edges (and `shoal status`) reach this one at, announced in the
    /// membership bucket (`--advertise-ip`; the chart gives the pod IP). Unset: the
    /// listener's own address, or loopback where it listens on every address.
    pub advertise_ip: Option<IpAddr>,
}

/// How this edge hands proxies to other edges.
#[derive(Clone, Debug)]
pub struct HandoffConfig {
    /// Proxies handed off per second, at least (`--handoff-rate`).
    pub rate: f64,
    /// On drain, every proxy is handed off within this (a share of `--drain-grace`, so
    /// the streams have time to end before the process exits).
    pub drain_window: Duration,
    /// How often proxies served here for another edge (their owner could not be reached
    /// when they connected) are sent home (`--rehome-interval`); zero: never.
    pub rehome_every: Duration,
}

impl Default for HandoffConfig {
    fn default() -> Self {
        Self {
            rate: 200.0,
            drain_window: Duration::from_secs(8),
            rehome_every: Duration::from_secs(30),
        }
    }
}

impl Default for EdgeConfig {
    fn default() -> Self {
        Self {
            member_id: format!("edge-{}", std::process::id()),
            xds: XdsConfig::default(),
            puller: PullerConfig::default(),
            membership: MembershipConfig::default(),
            update_capacity: 64,
            handoff: HandoffConfig::default(),
            own_by_ring: true,
            jwks: JwksFetchConfig::default(),
            generator: GeneratorConfig::default(),
            advertise_ip: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EdgeError {
    #[error("cannot listen for xDS on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("xDS server failed: {0}")]
    Serve(#[from] tonic::transport::Error),
    #[error("the push dispatcher stopped unexpectedly")]
    DispatcherExited,
    #[error("no xDS listener: give a secure listener's certificate or a plaintext address")]
    NoListener,
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
}

/// The address this edge announces for `bound`: at `advertise` when given; else where it
/// listens, unless that is every address (0.0.0.0, ::), which no other edge can dial:
/// then loopback, said so, as only an edge on this host could reach it.
fn advertised(bound: SocketAddr, advertise: Option<IpAddr>) -> SocketAddr {
    match advertise {
        Some(ip) => SocketAddr::new(ip, bound.port()),
        None if bound.ip().is_unspecified() => {
            let loopback = match bound {
                SocketAddr::V4(_) => IpAddr::from(std::net::Ipv4Addr::LOCALHOST),
                SocketAddr::V6(_) => IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
            };
            tracing::warn!(
                %bound,
                "the xDS listener is bound to every address and no --advertise-ip \
                 (SHOAL_ADVERTISE_IP) was given: announcing loopback, which edges on other \
                 hosts cannot reach (relays to this edge fail)"
            );
            SocketAddr::new(loopback, bound.port())
        }
        None => bound,
    }
}

/// An edge ready to run: metrics registered, transports in hand.
pub struct Edge {
    config: EdgeConfig,
    xds: XdsServer,
    puller: SnapshotPuller,
    updates: tokio::sync::mpsc::Receiver<crate::snapshot::SnapshotUpdate>,
    membership: Arc<dyn Membership>,
    ring_tx: watch::Sender<Arc<Ring>>,
    synced: Arc<AtomicBool>,
    jwks: JwksRefresher,
}

impl Edge {
    pub fn new(
        config: EdgeConfig,
        bus: Arc<dyn Bus>,
        store: Arc<dyn SnapshotStore>,
        membership: Arc<dyn Membership>,
        registry: &mut Registry,
    ) -> Self {
        let (puller, snapshots, updates) = SnapshotPuller::new(
            config.puller.clone(),
            store,
            bus,
            config.update_capacity,
            registry,
        );
        let keys = Arc::new(JwksStore::new());
        let jwks = JwksRefresher::new(config.jwks.clone(), keys.clone(), snapshots.clone());
        let xds = XdsServer::new(
            config.xds.clone(),
            Arc::new(Generator::with_jwks(config.generator.clone(), keys)),
            snapshots,
            registry,
        );
        xds.follow_announced(puller.announced());
        let ring_tx = watch::channel(Arc::new(Ring::default())).0;
        if config.own_by_ring {
            xds.own_by_ring(config.member_id.clone(), ring_tx.subscribe());
        }
        Edge {
            config,
            xds,
            synced: puller.synced(),
            puller,
            updates,
            membership,
            ring_tx,
            jwks,
        }
    }

    /// The ADS server, for `/debug/syncz`.
    pub fn xds(&self) -> XdsServer {
        self.xds.clone()
    }

    /// True once the latest snapshot in the store is being served.
    pub fn synced(&self) -> Arc<AtomicBool> {
        self.synced.clone()
    }

    /// Readiness: the latest snapshot is served and, owning proxies by ring, the ring
    /// holds the members read after this edge registered. Before that, an edge started
    /// beside others would take every stream as its own, then hand them off by thousands.
    pub fn ready(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let (synced, ring) = (self.synced(), self.ring());
        let by_ring = self.config.own_by_ring;
        move || {
            synced.load(std::sync::atomic::Ordering::Acquire)
                && (!by_ring || !ring.borrow().members().is_empty())
        }
    }

    /// This edge's ID in the membership ring.
    pub fn member_id(&self) -> &str {
        &self.config.member_id
    }

    /// The current membership ring.
    pub fn ring(&self) -> watch::Receiver<Arc<Ring>> {
        self.ring_tx.subscribe()
    }

    /// `/debug/push_status?revision=R`: how far config revision `R` (the latest pushed
    /// without one) reached the proxies it concerned here, named by this edge. A query
    /// that is not one answers `{"error": ...}`.
    pub fn push_status_debug(
        &self,
    ) -> impl Fn(&BTreeMap<String, String>) -> serde_json::Value + Send + Sync + 'static {
        let (xds, me) = (self.xds(), self.config.member_id.clone());
        move |query| {
            let mut answer = match xds.push_status(query.get("revision").map(String::as_str)) {
                Ok(status) => serde_json::to_value(status).unwrap_or_default(),
                Err(error) => serde_json::json!({ "error": error }),
            };
            answer["edge"] = me.clone().into();
            answer
        }
    }

    /// `/debug/config_dump?proxyID=P`: the proxy's config as it acknowledged it, in
    /// Envoy's `/config_dump` JSON.
    pub fn config_dump_debug(
        &self,
    ) -> impl Fn(&BTreeMap<String, String>) -> serde_json::Value + Send + Sync + 'static {
        let xds = self.xds();
        move |query| match asked_proxy(query) {
            Ok(proxy) => xds
                .config_dump(proxy)
                .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() })),
            Err(error) => serde_json::json!({ "error": error }),
        }
    }

    /// `/debug/config_diff?proxyID=P`: per type, what the proxy acknowledged against what
    /// this edge would send it now.
    pub fn config_diff_debug(
        &self,
    ) -> impl Fn(&BTreeMap<String, String>) -> serde_json::Value + Send + Sync + 'static {
        let (xds, me) = (self.xds(), self.config.member_id.clone());
        move |query| match asked_proxy(query) {
            Ok(proxy) => {
                let mut answer = xds
                    .config_diff(proxy)
                    .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }));
                answer["edge"] = me.clone().into();
                answer
            }
            Err(error) => serde_json::json!({ "error": error }),
        }
    }

    /// `/debug/ring`: the live members, and how the proxies connected here split between
    /// this edge and their owners.
    pub fn ring_debug(&self) -> impl Fn() -> serde_json::Value + Send + Sync + 'static {
        let (ring, xds, me) = (self.ring(), self.xds(), self.config.member_id.clone());
        move || {
            let ring = ring.borrow().clone();
            let connected = xds.proxy_ids();
            let split = placement::split(&ring, &me, connected.iter().map(String::as_str));
            serde_json::json!({
                "member": me,
                "members": ring.members().iter()
                    .map(|m| serde_json::json!({"id": m.id, "xds_addr": m.xds_addr}))
                    .collect::<Vec<_>>(),
                "connected": connected.len(),
                "owned": split.owned.len(),
                "foreign": split.foreign.len(),
            })
        }
    }

    /// Binds the xDS listeners (port 0 picks one) and returns the runnable edge with them.
    /// With a secure listener, this edge also relays over mTLS with its certificate.
    pub async fn bind(self, listen: Listen) -> Result<BoundEdge, EdgeError> {
        if listen.plaintext.is_none() && listen.secure.is_none() {
            return Err(EdgeError::NoListener);
        }
        let plaintext = match listen.plaintext {
            Some(addr) => Some(bind(addr).await?),
            None => None,
        };
        let secure = match listen.secure {
            Some(secure) => {
                let (listener, addr) = bind(secure.addr).await?;
                let config = crate::tls::server::server_config(&secure.tls)?;
                if self.config.own_by_ring && !secure.tls.roots.borrow().is_empty() {
                    self.xds.relay_over_tls(&secure.tls)?;
                }
                Some(BoundSecure {
                    listener,
                    addr,
                    config,
                    authenticator: secure.authenticator,
                    ca: secure.ca,
                    handshake: secure.handshake,
                })
            }
            None => None,
        };
        Ok(BoundEdge {
            edge: self,
            plaintext,
            secure,
        })
    }
}

async fn bind(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), EdgeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| EdgeError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| EdgeError::Bind { addr, source })?;
    Ok((listener, local))
}

/// The ADS listeners of an edge: at least one.
#[derive(Default)]
pub struct Listen {
    /// Plaintext ADS (istiod's 15010): every stream anonymous. Off unless asked for.
    pub plaintext: Option<SocketAddr>,
    /// ADS over TLS (istiod's 15012): every stream authenticated.
    pub secure: Option<SecureListen>,
}

/// The secure ADS listener.
pub struct SecureListen {
    pub addr: SocketAddr,
    /// The serving certificate (also presented to other edges when relaying; it must
    /// name [`crate::ads::XdsConfig::edge_identity`]) and the mesh root.
    pub tls: TlsMaterial,
    /// How a stream on this listener proves who it is (JWT, client certificate, ...).
    pub authenticator: Arc<dyn Authenticator>,
    /// Istio's CA (`CreateCertificate`), served beside ADS as on istiod's 15012.
    pub ca: Option<crate::ca::CaService>,
    pub handshake: HandshakeLimits,
}

struct BoundSecure {
    listener: TcpListener,
    addr: SocketAddr,
    config: Arc<rustls::ServerConfig>,
    authenticator: Arc<dyn Authenticator>,
    ca: Option<crate::ca::CaService>,
    handshake: HandshakeLimits,
}

pub struct BoundEdge {
    edge: Edge,
    plaintext: Option<(TcpListener, SocketAddr)>,
    secure: Option<BoundSecure>,
}

impl BoundEdge {
    /// The plaintext ADS address, if it listens there.
    pub fn plaintext_addr(&self) -> Option<SocketAddr> {
        self.plaintext.as_ref().map(|(_, a)| *a)
    }

    /// The secure ADS address, if it listens there.
    pub fn secure_addr(&self) -> Option<SocketAddr> {
        self.secure.as_ref().map(|s| s.addr)
    }

    /// Serves until `drain` starts; the dispatcher exiting early is an error.
    pub async fn run(self, drain: DrainWatch) -> Result<(), EdgeError> {
        let shutdown = || drain.wait();
        let BoundEdge {
            edge,
            plaintext,
            secure,
        } = self;
        // Relays dial the secure address (mTLS between edges); an edge without one is
        // never relayed to (the owner's refusal sends the proxy back to be served there).
        let relay_addr = secure
            .as_ref()
            .map(|s| s.addr)
            .or(plaintext.as_ref().map(|(_, a)| *a))
            .expect("bind checks one listener is set");
        let relay_addr = advertised(relay_addr, edge.config.advertise_ip);
        let me = Member {
            id: edge.config.member_id.clone(),
            xds_addr: relay_addr.to_string(),
        };
        // The puller keeps the snapshot current until every proxy is handed off: the
        // ones still here during a drain get every change.
        let (handed_off_tx, mut handed_off) = watch::channel(false);
        let puller = tokio::spawn(
            edge.puller
                .run(async move {
                    let _ = handed_off.wait_for(|done| *done).await;
                })
                .instrument(info_span!("snapshot_puller")),
        );
        // On a ring change, and now and then for proxies served away from their owner,
        // the proxies this edge no longer owns move, at a pace.
        let rebalance = tokio::spawn(
            rebalance::run(
                edge.xds.clone(),
                edge.ring_tx.subscribe(),
                RebalanceConfig {
                    rate: edge.config.handoff.rate,
                    settle: edge.config.membership.heartbeat_every,
                    rehome_every: edge.config.handoff.rehome_every,
                },
                shutdown(),
            )
            .instrument(info_span!("rebalance")),
        );
        let membership = tokio::spawn(
            membership::run(
                edge.config.membership.clone(),
                edge.membership.clone(),
                me,
                edge.ring_tx,
                shutdown(),
            )
            .instrument(info_span!("membership")),
        );
        // Fetched keys that change are pushed as a change of the RequestAuthentications
        // naming them.
        let jwks = tokio::spawn({
            let xds = edge.xds.clone();
            edge.jwks
                .run(move |changes| xds.push_changes(changes), shutdown())
                .instrument(info_span!("jwks_refresher"))
        });
        let xds = edge.xds.clone();
        // Drain: the membership task leaves the ring at once; the dispatcher keeps pushing
        // while every proxy is handed off at a pace, and only then closes what is left.
        let drain_window = edge.config.handoff.drain_window;
        let dispatch_shutdown = {
            let (xds, handoff, drained) = (xds.clone(), edge.config.handoff.clone(), shutdown());
            async move {
                drained.await;
                xds.drain_streams(handoff.drain_window, handoff.rate).await;
                handed_off_tx.send_replace(true);
            }
        };
        let mut dispatcher = tokio::spawn(
            async move { xds.run_dispatcher(edge.updates, dispatch_shutdown).await }
                .instrument(info_span!("push_dispatcher")),
        );
        let max_resets = Some(edge.config.xds.max_resets_per_connection).filter(|&n| n > 0);
        let plaintext_server = plaintext.map(|(listener, addr)| {
            info!(%addr, member = %edge.config.member_id, "plaintext xDS listening");
            let incoming = edge.xds.incoming(Origin::Plaintext, plain_conns(listener));
            tonic::transport::Server::builder()
                .http2_max_local_error_reset_streams(max_resets)
                .add_service(edge.xds.ads_service())
                .add_service(edge.xds.csds_service())
                .serve_with_incoming_shutdown(incoming, shutdown())
        });
        let secure_server = secure.map(|s| {
            info!(addr = %s.addr, member = %edge.config.member_id, "secure xDS (TLS) listening");
            let tls = crate::tls::incoming::incoming(s.listener, s.config, s.handshake);
            tonic::transport::Server::builder()
                .http2_max_local_error_reset_streams(max_resets)
                .add_service(edge.xds.secure_csds_service(s.authenticator.clone()))
                .add_service(edge.xds.secure_ads_service(s.authenticator))
                .add_service(edge.xds.tunnel_service())
                .add_optional_service(s.ca)
                .serve_with_incoming_shutdown(edge.xds.incoming(Origin::Secure, tls), shutdown())
        });
        let server = async move {
            let plaintext = async {
                match plaintext_server {
                    Some(s) => s.await,
                    None => Ok(()),
                }
            };
            let secure = async {
                match secure_server {
                    Some(s) => s.await,
                    None => Ok(()),
                }
            };
            tokio::try_join!(plaintext, secure).map(|_| ())
        };
        let mut server = std::pin::pin!(server);
        let mut dispatcher_done = false;
        let result = tokio::select! {
            r = &mut server => r.map_err(EdgeError::from),
            _ = &mut dispatcher => {
                dispatcher_done = true;
                // On shutdown the dispatcher closes the streams first and the server then
                // finishes; a dispatcher that stops on its own leaves the server running.
                match tokio::time::timeout(std::time::Duration::from_secs(5), &mut server).await {
                    Ok(r) => r.map_err(EdgeError::from),
                    Err(_) => {
                        error!("push dispatcher exited; stopping the edge");
                        Err(EdgeError::DispatcherExited)
                    }
                }
            }
        };
        // The dispatcher closes streams on drain; give it and the others a moment.
        if !dispatcher_done {
            let wait = drain_window + std::time::Duration::from_secs(2);
            let _ = tokio::time::timeout(wait, dispatcher).await;
        }
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), membership).await;
        puller.abort();
        rebalance.abort();
        jwks.abort();
        result
    }
}

/// The proxy a debug page is asked about: `proxyID` (istiod's name for it) or `proxy`.
fn asked_proxy(query: &BTreeMap<String, String>) -> Result<&str, &'static str> {
    query
        .get("proxyID")
        .or_else(|| query.get("proxy"))
        .map(String::as_str)
        .ok_or("name the proxy: ?proxyID=<proxy ID>")
}

#[cfg(test)]
mod advertise_tests {
    use super::advertised;
    use std::net::SocketAddr;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// The chart binds 0.0.0.0: the edge announced 0.0.0.0:15012, which other edges'
    /// relays dialled as themselves.
    #[test]
    fn an_edge_bound_to_every_address_announces_its_advertised_ip() {
        let pod = "10.1.2.3".parse().ok();
        assert_eq!(
            advertised(addr("0.0.0.0:15012"), pod),
            addr("10.1.2.3:15012")
        );
        assert_eq!(
            advertised(addr("0.0.0.0:15012"), None),
            addr("127.0.0.1:15012")
        );
        assert_eq!(advertised(addr("[::]:15012"), None), addr("[::1]:15012"));
        assert_eq!(
            advertised(addr("10.0.0.9:15012"), None),
            addr("10.0.0.9:15012")
        );
    }
}
