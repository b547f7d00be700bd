//! `NatsBus`: push requests on the JetStream work-queue stream `SHOAL_PUSH` (kept while no
//! builder runs, each taken by one builder through the shared durable consumer, removed
//! once acknowledged, redelivered after `ack_wait` otherwise); snapshot announcements on
//! core NATS `shoal.snapshot`. Payloads are JSON; trace context rides in headers.
//!
//! Core NATS drops what is published while a subscriber is disconnected, so the snapshot
//! stream reports every reconnect as `Lagged(0)`: the edge then re-reads `latest`.

use super::headers::{from_headers, to_headers};
use super::{NatsError, Result, no_room};
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, pull};
use async_nats::jetstream::stream::{self, DiscardPolicy, RetentionPolicy, StorageType};
use async_nats::jetstream::{self, AckKind};
use async_nats::{Client, Subscriber};
use async_trait::async_trait;
use futures::stream::{self as fstream, BoxStream, StreamExt};
use shoal_proto::push::PushRequest;
use shoal_proto::transport::{
    self, Ack, BUILDER_QUEUE, Bus, Delivery, PUSH_STREAM, PUSH_SUBJECT, SNAPSHOT_SUBJECT,
    SnapshotEvent, TransportError,
};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Bounds of the push stream and its consumer.
#[derive(Clone, Debug)]
pub struct NatsBusConfig {
    /// Push requests the stream holds; beyond it publishes fail (never silently dropped),
    /// so ingest backs off and merges.
    pub max_msgs: i64,
    pub max_bytes: i64,
    pub storage: StorageType,
    /// How long a builder may hold a request unacknowledged before it is redelivered.
    pub ack_wait: Duration,
    /// Requests out for processing across every builder at once.
    pub max_ack_pending: i64,
    /// Deliveries per request before the server gives up on it; -1 = never.
    pub max_deliver: i64,
    /// Requests one builder pulls ahead; small keeps work spread across builders.
    pub pull_batch: usize,
    /// How often a snapshot subscriber checks whether the connection was re-established.
    pub reconnect_check: Duration,
}

impl Default for NatsBusConfig {
    fn default() -> Self {
        Self {
            max_msgs: 100_000,
            max_bytes: 256 * 1024 * 1024,
            storage: StorageType::File,
            // A builder that dies holding a request: another takes it within 5 s (a build
            // takes well under a second; a redelivered request is rebuilt harmlessly).
            ack_wait: Duration::from_secs(5),
            max_ack_pending: 256,
            max_deliver: -1,
            pull_batch: 1,
            reconnect_check: Duration::from_secs(1),
        }
    }
}

pub struct NatsBus {
    client: Client,
    js: jetstream::Context,
    stream: stream::Stream,
    config: NatsBusConfig,
}

impl NatsBus {
    /// Ensures the push stream exists with these bounds (publishers and consumers both
    /// call this, so requests published before any builder starts are kept).
    pub async fn open(client: Client, config: NatsBusConfig) -> Result<Self> {
        let js = jetstream::new(client.clone());
        let wanted = stream::Config {
            name: PUSH_STREAM.into(),
            description: Some("Shoal push requests, consumed by the builders".into()),
            subjects: vec![PUSH_SUBJECT.into()],
            retention: RetentionPolicy::WorkQueue,
            discard: DiscardPolicy::New,
            max_messages: config.max_msgs,
            max_bytes: config.max_bytes,
            storage: config.storage,
            ..Default::default()
        };
        let mut stream = js.get_or_create_stream(wanted.clone()).await.map_err(|e| {
            let message =
                no_room(&e, config.storage, config.max_bytes).unwrap_or_else(|| e.to_string());
            NatsError::jetstream(format!("stream {PUSH_STREAM}"), message)
        })?;
        let current = &stream.cached_info().config;
        if current.max_messages != wanted.max_messages || current.max_bytes != wanted.max_bytes {
            match js.update_stream(wanted).await {
                Ok(_) => {
                    stream = js
                        .get_stream(PUSH_STREAM)
                        .await
                        .map_err(|e| NatsError::jetstream(format!("stream {PUSH_STREAM}"), e))?;
                }
                Err(error) => tracing::warn!(%error, "cannot update push stream limits"),
            }
        }
        Ok(Self {
            client,
            js,
            stream,
            config,
        })
    }
}

fn encode<T: serde::Serialize>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| NatsError::Codec(e.to_string()))
}

struct NatsAck(jetstream::Message);

#[async_trait]
impl Ack for NatsAck {
    async fn ack(&self) -> transport::Result<()> {
        self.0
            .ack()
            .await
            .map_err(|e| NatsError::publish("ack", e).into())
    }
}

/// Decodes one delivery; an undecodable request is terminated (never redelivered) so it
/// cannot wedge the queue, and reported as a codec error.
async fn delivery(
    message: std::result::Result<jetstream::Message, impl std::fmt::Display>,
) -> transport::Result<Delivery<PushRequest>> {
    let message = message.map_err(|e| NatsError::subscribe(PUSH_SUBJECT, e))?;
    match serde_json::from_slice::<PushRequest>(&message.payload) {
        Ok(mut value) => Ok(Delivery {
            message: {
                value.changes.trace = from_headers(message.headers.as_ref());
                value
            },
            acker: Box::new(NatsAck(message)),
        }),
        Err(error) => {
            if let Err(term) = message.ack_with(AckKind::Term).await {
                tracing::warn!(error = %term, "cannot terminate undecodable push request");
            }
            Err(TransportError::Codec(format!("push request: {error}")))
        }
    }
}

/// A snapshot subscription that also reports reconnects (see the module doc).
struct SnapshotEvents {
    subscriber: Subscriber,
    client: Client,
    connects: u64,
    tick: tokio::time::Interval,
}

impl SnapshotEvents {
    async fn next(mut self) -> Option<(transport::Result<SnapshotEvent>, Self)> {
        loop {
            tokio::select! {
                message = self.subscriber.next() => {
                    let message = message?;
                    let event = serde_json::from_slice::<SnapshotEvent>(&message.payload)
                        .map(|mut event| {
                            event.changes.trace = from_headers(message.headers.as_ref());
                            event
                        })
                        .map_err(|e| TransportError::Codec(format!("snapshot event: {e}")));
                    return Some((event, self));
                }
                _ = self.tick.tick() => {
                    let connects = self.client.statistics().connects.load(Ordering::Relaxed);
                    if connects != self.connects {
                        self.connects = connects;
                        return Some((Err(TransportError::Lagged(0)), self));
                    }
                }
            }
        }
    }
}

#[async_trait]
impl Bus for NatsBus {
    async fn publish_push(&self, request: &PushRequest) -> transport::Result<()> {
        let payload = encode(request)?;
        let headers = to_headers(&request.changes.trace);
        self.js
            .publish_with_headers(PUSH_SUBJECT, headers, payload.into())
            .await
            .map_err(|e| NatsError::publish(PUSH_SUBJECT, e))?
            .await
            .map_err(|e| NatsError::publish(PUSH_SUBJECT, e))?;
        Ok(())
    }

    async fn push_requests(
        &self,
    ) -> transport::Result<BoxStream<'static, transport::Result<Delivery<PushRequest>>>> {
        let consumer_error = |e| NatsError::jetstream(format!("consumer {BUILDER_QUEUE}"), e);
        // Create-or-update, so a changed ack_wait or bound takes effect on restart.
        let consumer = self
            .stream
            .create_consumer(pull::Config {
                durable_name: Some(BUILDER_QUEUE.into()),
                description: Some("Shoal builders (shared queue)".into()),
                deliver_policy: DeliverPolicy::All,
                ack_policy: AckPolicy::Explicit,
                ack_wait: self.config.ack_wait,
                max_ack_pending: self.config.max_ack_pending,
                max_deliver: self.config.max_deliver,
                ..Default::default()
            })
            .await
            .map_err(|e| consumer_error(e.to_string()))?;
        let messages = consumer
            .stream()
            .max_messages_per_batch(self.config.pull_batch.max(1))
            .messages()
            .await
            .map_err(|e| consumer_error(e.to_string()))?;
        Ok(messages.then(delivery).boxed())
    }

    async fn publish_snapshot(&self, event: &SnapshotEvent) -> transport::Result<()> {
        let payload = encode(event)?;
        let headers = to_headers(&event.changes.trace);
        self.client
            .publish_with_headers(SNAPSHOT_SUBJECT, headers, payload.into())
            .await
            .map_err(|e| NatsError::publish(SNAPSHOT_SUBJECT, e))?;
        Ok(())
    }

    async fn snapshot_events(
        &self,
    ) -> transport::Result<BoxStream<'static, transport::Result<SnapshotEvent>>> {
        let connects = self.client.statistics().connects.load(Ordering::Relaxed);
        let subscriber = self
            .client
            .subscribe(SNAPSHOT_SUBJECT)
            .await
            .map_err(|e| NatsError::subscribe(SNAPSHOT_SUBJECT, e))?;
        let mut tick = tokio::time::interval(self.config.reconnect_check);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let events = SnapshotEvents {
            subscriber,
            client: self.client.clone(),
            connects,
            tick,
        };
        Ok(fstream::unfold(events, SnapshotEvents::next).boxed())
    }
}
