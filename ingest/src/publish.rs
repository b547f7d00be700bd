//! Publishing debounced push requests on the bus (`shoal.push`), retried while the bus is
//! unavailable.

use crate::metrics::{Metrics, TypeLabel};
use crate::retry::{RetryConfig, retry};
use shoal_infra::telemetry::{self, TRACE_TARGET};
use shoal_proto::push::PushRequest;
use shoal_proto::transport::Bus;
use std::sync::Arc;
use std::time::SystemTime;
use tracing::{Instrument, info_span};

pub(crate) struct Publisher {
    bus: Arc<dyn Bus>,
    metrics: Metrics,
    retry: RetryConfig,
}

impl Publisher {
    pub fn new(bus: Arc<dyn Bus>, metrics: Metrics, retry: RetryConfig) -> Self {
        Self {
            bus,
            metrics,
            retry,
        }
    }

    /// Publishes `req`, retrying while the bus is unavailable. Other errors (the bus was
    /// closed at shutdown) are logged: the next start's full push covers the change.
    pub async fn publish(&self, mut req: PushRequest) {
        let push_type = if req.changes.full { "full" } else { "eds" };
        // The debounced push: a child of its earliest change's trace, or a trace's root
        // (a start-up or resync push); the builder's spans follow from it.
        let span = info_span!(
            target: TRACE_TARGET,
            "push publish",
            push = push_type,
            revision = req.revision,
            configs = req.changes.keys.len(),
            events = req.changes.events(),
            linked = req.changes.linked.len(),
            links_dropped = req.changes.linked_dropped,
            waited_ms = tracing::field::Empty,
        );
        telemetry::set_parent(&span, &req.changes.trace);
        // The other changes merged in keep their own traces, each linked from here.
        telemetry::add_links(&span, &req.changes.linked);
        let trace = telemetry::inject(&span);
        if !trace.is_empty() {
            req.changes.trace = trace;
        }
        self.publish_in(req).instrument(span).await;
    }

    async fn publish_in(&self, req: PushRequest) {
        let push_type = if req.changes.full { "full" } else { "eds" };
        let bus = &self.bus;
        let result = retry("publish_push", self.retry, &self.metrics, || {
            bus.publish_push(&req)
        })
        .await;
        match result {
            Ok(()) => {
                self.metrics
                    .pushes
                    .get_or_create(&TypeLabel { r#type: push_type })
                    .inc();
                for (reason, events) in &req.changes.reasons {
                    self.metrics
                        .push_triggers
                        .get_or_create(&TypeLabel {
                            r#type: reason.as_str(),
                        })
                        .inc_by(*events);
                }
                let waited = SystemTime::now()
                    .duration_since(req.changes.start())
                    .unwrap_or_default();
                self.metrics.debounce_time.observe(waited.as_secs_f64());
                tracing::Span::current().record("waited_ms", waited.as_millis() as u64);
                tracing::info!(
                    push = push_type,
                    revision = req.revision,
                    configs = req.changes.keys.len(),
                    events = req.changes.events(),
                    ?waited,
                    "push published"
                );
            }
            Err(e) => tracing::error!(
                push = push_type,
                revision = req.revision,
                "push request not published: {e}"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Flaky;
    use futures::StreamExt;
    use shoal_infra::memory::MemoryBus;
    use shoal_proto::change::TriggerReason;
    use shoal_proto::config::{ConfigKey, Kind};
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn retries_while_unavailable_then_counts() {
        let bus = Flaky::new(MemoryBus::default(), 3);
        let metrics = Metrics::unregistered();
        let retry = RetryConfig {
            min: Duration::from_millis(10),
            max: Duration::from_secs(1),
        };
        let publisher = Publisher::new(bus.clone(), metrics.clone(), retry);
        let now = SystemTime::now();
        let eds = PushRequest::for_change(ConfigKey::new(Kind::EndpointSlice, "ns", "s"), 4, now);
        let full = PushRequest::full_everything(TriggerReason::GlobalUpdate, 9, now);
        let start = tokio::time::Instant::now();
        publisher.publish(eds.clone()).await;
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(70),
            "10 + 20 + 40 ms of backoff"
        );
        publisher.publish(full.clone()).await;

        let mut stream = bus.inner.push_requests().await.unwrap();
        let first = stream.next().await.unwrap().unwrap().message;
        let second = stream.next().await.unwrap().unwrap().message;
        assert_eq!((first, second), (eds, full));
        let count = |t| metrics.pushes.get_or_create(&TypeLabel { r#type: t }).get();
        assert_eq!((count("eds"), count("full")), (1, 1));
        let trigger = |t| {
            metrics
                .push_triggers
                .get_or_create(&TypeLabel { r#type: t })
                .get()
        };
        assert_eq!((trigger("endpoint"), trigger("global")), (1, 1));
    }
}
