//! The ADS server's metrics, under Istio's names (counters gain `_total` in the
//! OpenMetrics exposition).

use super::scope::short_type;
use crate::push_queue::{PushEvent, PushQueue};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::time::Duration;

/// One label (`type`, or a relay failure's `reason`).
type OneLabel = [(&'static str, &'static str); 1];
type HistogramFamily = Family<OneLabel, Histogram, fn() -> Histogram>;

const PUSH_BUCKETS: [f64; 8] = [0.001, 0.01, 0.1, 0.5, 1.0, 3.0, 5.0, 10.0];
const CONVERGENCE_BUCKETS: [f64; 9] = [0.01, 0.1, 0.5, 1.0, 3.0, 5.0, 10.0, 20.0, 30.0];
/// Every `type` label value ([`short_type`]): the NACK counters exist (at 0) from the
/// start, so that `increase()` in the alert sees a type's first NACK.
const TYPES: [&str; 6] = ["cds", "eds", "lds", "rds", "sds", "other"];

const SEND_BUCKETS: [f64; 7] = [0.0001, 0.001, 0.01, 0.1, 1.0, 3.0, 5.0];

/// Handles to every ADS metric; cheap to clone.
#[derive(Clone)]
pub(crate) struct Metrics {
    pub connected: Gauge,
    pushes: Family<OneLabel, Counter>,
    push_time: HistogramFamily,
    pub convergence: Histogram,
    rejects: Family<OneLabel, Counter>,
    expired_nonce: Family<OneLabel, Counter>,
    pub send_time: Histogram,
    pub push_context_errors: Counter,
    pub write_timeout: Counter,
    pub handoffs: Counter,
    pub rate_limited: Counter,
    pub relayed: Gauge,
    pub queued_bytes: Gauge,
    relay_failures: Family<OneLabel, Counter>,
    pub unsupported_type: Counter,
}

/// Why a relay did not start or ended early (`shoal_xds_relay_failures_total{reason}`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum RelayFailure {
    /// The owner could not be reached or refused the stream: served here instead.
    ServedHere,
    /// The owner did not take the stream in time: the proxy was told to reconnect.
    OwnerBusy,
    /// The owner's stream failed while relayed (its connection ended).
    OwnerGone,
}

impl RelayFailure {
    fn label(self) -> &'static str {
        match self {
            RelayFailure::ServedHere => "served_here",
            RelayFailure::OwnerBusy => "owner_busy",
            RelayFailure::OwnerGone => "owner_gone",
        }
    }
}

/// `shoal_xds_push_queue_depth`: connections waiting in the push queue, read from the
/// queue at scrape time. A collector rather than a gauge kept in step: the queue changes
/// on every enqueue, merge, dequeue, re-queue after a push, removal and close (several
/// places, under its lock), while a scrape comes every few seconds; reading
/// [`PushQueue::pending`] then costs one lock per scrape and cannot drift from the queue.
struct QueueDepth(Arc<PushQueue<u64, PushEvent>>);

impl std::fmt::Debug for QueueDepth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueDepth").finish_non_exhaustive()
    }
}

impl Collector for QueueDepth {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let depth = ConstGauge::new(self.0.pending() as i64);
        let metric = encoder.encode_descriptor(
            "shoal_xds_push_queue_depth",
            "Connections waiting in the push queue (at most one entry per connection; \
             pushes in progress not counted)",
            None,
            depth.metric_type(),
        )?;
        depth.encode(metric)
    }
}

fn push_histogram() -> Histogram {
    Histogram::new(PUSH_BUCKETS)
}

impl Metrics {
    pub fn relay_failed(&self, why: RelayFailure) {
        self.relay_failures
            .get_or_create(&[("reason", why.label())])
            .inc();
    }

    /// Registers every ADS metric, `queue`'s depth read at scrape time.
    pub fn new(registry: &mut Registry, queue: &Arc<PushQueue<u64, PushEvent>>) -> Self {
        let m = Metrics {
            connected: Gauge::default(),
            pushes: Family::default(),
            push_time: Family::new_with_constructor(push_histogram as fn() -> Histogram),
            convergence: Histogram::new(CONVERGENCE_BUCKETS),
            rejects: Family::default(),
            expired_nonce: Family::default(),
            send_time: Histogram::new(SEND_BUCKETS),
            push_context_errors: Counter::default(),
            write_timeout: Counter::default(),
            handoffs: Counter::default(),
            rate_limited: Counter::default(),
            relayed: Gauge::default(),
            queued_bytes: Gauge::default(),
            relay_failures: Family::default(),
            unsupported_type: Counter::default(),
        };
        for ty in TYPES {
            let _created = m.rejects.get_or_create(&[("type", ty)]);
        }
        registry.register_collector(Box::new(QueueDepth(queue.clone())));
        registry.register(
            "shoal_xds_relay_failures",
            "Relays that did not start or ended early, by reason: served_here (the owner \
             could not be reached or refused), owner_busy (it did not take the stream in \
             time; the proxy reconnects), owner_gone (its stream failed while relayed)",
            m.relay_failures.clone(),
        );
        registry.register(
            "shoal_xds_unsupported_type_requests",
            "Requests for a resource type this edge does not serve, ignored without a \
             response (as Istio does)",
            m.unsupported_type.clone(),
        );
        registry.register(
            "shoal_xds_relayed_streams",
            "Streams this edge relays to the edge that owns their proxy",
            m.relayed.clone(),
        );
        registry.register(
            "shoal_xds_rate_limited",
            "New streams refused for exceeding SHOAL_MAX_REQUESTS_PER_SECOND",
            m.rate_limited.clone(),
        );
        registry.register(
            "shoal_xds_handoffs",
            "Streams this edge ended so that another edge serves the proxy (ring change, drain)",
            m.handoffs.clone(),
        );
        registry.register(
            "pilot_xds",
            "Number of proxies connected to this edge using xDS",
            m.connected.clone(),
        );
        registry.register(
            "pilot_xds_pushes",
            "xDS responses sent, by type (cds, eds, lds, rds)",
            m.pushes.clone(),
        );
        registry.register(
            "pilot_xds_push_time",
            "Seconds to generate and send one type's response in a push",
            m.push_time.clone(),
        );
        registry.register(
            "pilot_proxy_convergence_time",
            "Seconds from the earliest change of a push to its delivery to a proxy",
            m.convergence.clone(),
        );
        registry.register(
            "pilot_total_xds_rejects",
            "Responses rejected by proxies (NACKs), by type (cds, eds, lds and rds present \
             from the start, at 0)",
            m.rejects.clone(),
        );
        registry.register(
            "pilot_xds_expired_nonce",
            "Requests answering a superseded nonce (ignored), by type",
            m.expired_nonce.clone(),
        );
        registry.register(
            "pilot_xds_send_time",
            "Seconds to hand one response to the stream",
            m.send_time.clone(),
        );
        registry.register(
            "pilot_xds_push_context_errors",
            "Resource generation failures",
            m.push_context_errors.clone(),
        );
        registry.register(
            "shoal_xds_queued_bytes",
            "Bytes of responses served streams handed to HTTP/2 and it has not yet written \
             to their connections (at most SHOAL_XDS_STREAM_BUFFER chunks per stream)",
            m.queued_bytes.clone(),
        );
        registry.register(
            "pilot_xds_write_timeout",
            "Streams closed because a send exceeded SHOAL_SEND_TIMEOUT",
            m.write_timeout.clone(),
        );
        m
    }

    pub fn pushed(&self, type_url: &str) {
        self.pushes
            .get_or_create(&[("type", short_type(type_url))])
            .inc();
    }

    pub fn push_time(&self, type_url: &str, d: Duration) {
        self.push_time
            .get_or_create(&[("type", short_type(type_url))])
            .observe(d.as_secs_f64());
    }

    pub fn rejected(&self, type_url: &str) {
        self.rejects
            .get_or_create(&[("type", short_type(type_url))])
            .inc();
    }

    pub fn expired_nonce(&self, type_url: &str) {
        self.expired_nonce
            .get_or_create(&[("type", short_type(type_url))])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::change::ChangeSet;
    use shoal_proto::push_context::PushContext;

    fn scrape(registry: &Registry) -> String {
        let mut body = String::new();
        prometheus_client::encoding::text::encode(&mut body, registry).unwrap();
        body
    }

    #[test]
    fn nack_counters_exist_at_zero_and_the_queue_depth_is_read_when_scraped() {
        let queue = Arc::new(PushQueue::new());
        let mut registry = Registry::default();
        let metrics = Metrics::new(&mut registry, &queue);
        let body = scrape(&registry);
        for ty in TYPES {
            let line = format!("\npilot_total_xds_rejects_total{{type=\"{ty}\"}} 0\n");
            assert!(body.contains(&line), "{body}");
        }
        assert!(
            body.contains("# TYPE shoal_xds_push_queue_depth gauge\n"),
            "{body}"
        );
        assert!(body.contains("\nshoal_xds_push_queue_depth 0\n"), "{body}");

        let event = || {
            PushEvent::new(
                Arc::new(PushContext::empty()),
                Arc::new(ChangeSet::default()),
            )
        };
        queue.enqueue(1, event());
        queue.enqueue(2, event());
        queue.enqueue(1, event()); // merged: still one entry for connection 1
        metrics.rejected(crate::xds::types::ROUTE);
        let body = scrape(&registry);
        assert!(body.contains("\nshoal_xds_push_queue_depth 2\n"), "{body}");
        assert!(
            body.contains("\npilot_total_xds_rejects_total{type=\"rds\"} 1\n"),
            "{body}"
        );
        queue.remove(&2);
        assert!(scrape(&registry).contains("\nshoal_xds_push_queue_depth 1\n"));
    }
}
