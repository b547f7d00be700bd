//! [`XdsServer`]: the ADS gRPC service, the push dispatcher and `/debug/syncz`.

use super::config::XdsConfig;
use super::connection;
use super::error::AdsError;
use super::metrics::Metrics;
use super::outbound::Outbound;
use super::protocol::Protocol;
use super::registry::Registry;
pub use super::transport::AdsService;
use crate::proxy::Proxy;
use crate::push_queue::{PushEvent, PushQueue};
use crate::snapshot::SnapshotUpdate;
use crate::xds::Generator;
use futures::{Stream, StreamExt};
use shoal_proto::push_context::PushContext;
use std::sync::Arc;
use tokio::sync::{Semaphore, mpsc, oneshot, watch};
use tonic::Status;
use tracing::Instrument;

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
}

impl Shared {
    /// The newest snapshot.
    pub fn latest(&self) -> Arc<PushContext> {
        self.snapshots.borrow().clone()
    }

    /// Admits a stream: reads its first request, identifies the proxy and starts its task.
    pub(crate) async fn accept<M, S>(self: &Arc<Self>, mut inbound: S) -> Result<Outbound, Status>
    where
        M: Protocol,
        S: Stream<Item = Result<M::Request, Status>> + Unpin + Send + 'static,
    {
        if *self.draining.borrow() {
            return Err(AdsError::ShuttingDown.into());
        }
        let permit = self
            .streams
            .clone()
            .try_acquire_owned()
            .map_err(|_| AdsError::TooManyStreams(self.config.max_streams))?;
        let first = match tokio::time::timeout(self.config.first_request_timeout, inbound.next())
            .await
        {
            Ok(Some(Ok(req))) => req,
            Ok(Some(Err(status))) => return Err(status),
            Ok(None) => return Err(Status::cancelled("stream closed before its first request")),
            Err(_) => {
                return Err(Status::deadline_exceeded(format!(
                    "no request within {:?} of opening the stream \
                     (SHOAL_XDS_FIRST_REQUEST_TIMEOUT)",
                    self.config.first_request_timeout
                )));
            }
        };
        let proxy = Proxy::from_node(M::node(&first)).map_err(AdsError::from)?;
        let (out_tx, out_rx) = mpsc::channel(self.config.stream_buffer.max(1));
        let (close_tx, close_rx) = oneshot::channel();
        let span = tracing::info_span!(
            "ads",
            protocol = M::NAME,
            proxy = %proxy.id,
            conn = tracing::field::Empty,
        );
        tokio::spawn(
            connection::serve::<M, S>(
                self.clone(),
                proxy,
                Box::new(first),
                inbound,
                out_tx,
                close_tx,
                permit,
            )
            .instrument(span),
        );
        Ok(Outbound::new(out_rx, close_rx))
    }
}

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
        let shared = Shared {
            throttle: Arc::new(Semaphore::new(config.push_throttle.max(1))),
            streams: Arc::new(Semaphore::new(config.max_streams)),
            config,
            generator,
            snapshots,
            registry: Registry::default(),
            queue: Arc::new(PushQueue::new()),
            metrics: Metrics::new(registry),
            draining: watch::Sender::new(false),
        };
        XdsServer {
            shared: Arc::new(shared),
        }
    }

    /// The gRPC service to mount on a tonic server (`Server::builder().add_service(..)`).
    pub fn ads_service(&self) -> AdsService {
        AdsService::new(self.shared.clone())
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

    /// `/debug/syncz`: per connected proxy, its identity and per-type sync state.
    pub fn syncz(&self) -> serde_json::Value {
        self.shared.registry.syncz()
    }

    /// Streams currently connected.
    pub fn connected(&self) -> usize {
        self.shared.registry.len()
    }
}

#[cfg(test)]
mod tests;
