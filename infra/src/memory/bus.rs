//! `MemoryBus`: push requests on a bounded queue that every consumer shares (each request
//! to one consumer; a full queue makes publishers wait), snapshot events on a broadcast
//! whose lag is reported as `TransportError::Lagged`.

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt};
use shoal_proto::push::PushRequest;
use shoal_proto::transport::{Ack, Bus, Delivery, Result, SnapshotEvent, TransportError};
use std::sync::Arc;
use tokio::sync::{Mutex, broadcast, mpsc};
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;

/// Bounds of the in-process bus.
#[derive(Clone, Debug)]
pub struct MemoryBusConfig {
    /// Push requests held while no consumer takes them; publishers wait beyond this.
    pub push_capacity: usize,
    /// Snapshot events buffered per subscriber before it lags.
    pub snapshot_capacity: usize,
}

impl Default for MemoryBusConfig {
    fn default() -> Self {
        Self {
            push_capacity: 1024,
            snapshot_capacity: 256,
        }
    }
}

type PushQueue = Arc<Mutex<mpsc::Receiver<PushRequest>>>;

pub struct MemoryBus {
    push_tx: mpsc::Sender<PushRequest>,
    /// Shared by every consumer stream; the tokio mutex is fair, so waiting consumers
    /// take turns.
    push_rx: PushQueue,
    snapshots: broadcast::Sender<SnapshotEvent>,
}

impl Default for MemoryBus {
    fn default() -> Self {
        Self::new(MemoryBusConfig::default())
    }
}

impl MemoryBus {
    pub fn new(config: MemoryBusConfig) -> Self {
        let (push_tx, push_rx) = mpsc::channel(config.push_capacity.max(1));
        Self {
            push_tx,
            push_rx: Arc::new(Mutex::new(push_rx)),
            snapshots: broadcast::channel(config.snapshot_capacity.max(1)).0,
        }
    }
}

/// In process nothing is redelivered, so acknowledging has nothing to do.
struct NoopAck;

#[async_trait]
impl Ack for NoopAck {
    async fn ack(&self) -> Result<()> {
        Ok(())
    }
}

#[async_trait]
impl Bus for MemoryBus {
    async fn publish_push(&self, request: &PushRequest) -> Result<()> {
        self.push_tx
            .send(request.clone())
            .await
            .map_err(|_| TransportError::Closed)
    }

    async fn push_requests(&self) -> Result<BoxStream<'static, Result<Delivery<PushRequest>>>> {
        let next = |queue: PushQueue| async move {
            let message = queue.lock().await.recv().await?;
            let delivery = Delivery {
                message,
                acker: Box::new(NoopAck) as Box<dyn Ack>,
            };
            Some((Ok(delivery), queue))
        };
        Ok(stream::unfold(self.push_rx.clone(), next).boxed())
    }

    async fn publish_snapshot(&self, event: &SnapshotEvent) -> Result<()> {
        // Err = nobody subscribed, as with core NATS: the event is simply not seen.
        let _ = self.snapshots.send(event.clone());
        Ok(())
    }

    async fn snapshot_events(&self) -> Result<BoxStream<'static, Result<SnapshotEvent>>> {
        let events = BroadcastStream::new(self.snapshots.subscribe()).map(|item| {
            item.map_err(|BroadcastStreamRecvError::Lagged(missed)| TransportError::Lagged(missed))
        });
        Ok(events.boxed())
    }
}
