//! The ingest's Prometheus metrics, registered once and shared by its tasks.
//!
//! Names follow Istio's where one exists (`pilot_debounce_time`, `pilot_push_triggers`);
//! counters get their `_total` suffix from the encoder.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct EventLabels {
    pub kind: &'static str,
    pub event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindLabel {
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TypeLabel {
    pub r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OpLabel {
    pub op: &'static str,
}

/// Every metric the ingest exports.
#[derive(Clone, Debug)]
pub(crate) struct Metrics {
    /// `shoal_ingest_config_events_total{kind,event}`: ConfigStore events (add, update, delete).
    pub config_events: Family<EventLabels, Counter>,
    /// `shoal_ingest_config_rejected_total{kind}`: every rejection of an object.
    pub rejected: Family<KindLabel, Counter>,
    /// `shoal_ingest_config_rejected_objects`: objects rejected right now.
    pub rejected_current: Gauge,
    /// `shoal_ingest_config_warnings{kind}`: warnings on the objects accepted right now
    /// (fields Shoal ignores, validation warnings). Labels: the kinds Shoal reads, and
    /// `other` for documents of kinds it does not read (ignored, said so).
    pub warnings_current: Family<KindLabel, Gauge>,
    /// `shoal_ingest_pushes_published_total{type=full|eds}`.
    pub pushes: Family<TypeLabel, Counter>,
    /// `pilot_push_triggers_total{type}`: the reasons merged into published pushes.
    pub push_triggers: Family<TypeLabel, Counter>,
    /// `pilot_debounce_time`: first event of a batch to its publication, in seconds.
    pub debounce_time: Histogram,
    /// `shoal_ingest_kv_writes_total{op=put|delete}`.
    pub kv_writes: Family<OpLabel, Counter>,
    /// `shoal_ingest_transport_retries_total{op}`: retried bus / KV calls.
    pub retries: Family<OpLabel, Counter>,
}

impl Metrics {
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::unregistered();
        registry.register(
            "shoal_ingest_config_events",
            "Config store events by kind and event (add, update, delete)",
            m.config_events.clone(),
        );
        registry.register(
            "shoal_ingest_config_rejected",
            "Objects rejected by parsing or validation, by kind",
            m.rejected.clone(),
        );
        registry.register(
            "shoal_ingest_config_rejected_objects",
            "Objects currently rejected (their earlier valid version, if any, is served)",
            m.rejected_current.clone(),
        );
        registry.register(
            "shoal_ingest_config_warnings",
            "Warnings on accepted objects right now (ignored fields, validation warnings), by kind",
            m.warnings_current.clone(),
        );
        registry.register(
            "shoal_ingest_pushes_published",
            "Push requests published on the bus, by type (full or eds)",
            m.pushes.clone(),
        );
        registry.register(
            "pilot_push_triggers",
            "Events merged into published pushes, by trigger reason",
            m.push_triggers.clone(),
        );
        registry.register(
            "pilot_debounce_time",
            "Seconds from the first event of a debounced batch to its publication",
            m.debounce_time.clone(),
        );
        registry.register(
            "shoal_ingest_kv_writes",
            "Writes to the config KV, by operation",
            m.kv_writes.clone(),
        );
        registry.register(
            "shoal_ingest_transport_retries",
            "Bus and config KV calls retried after the transport was unavailable",
            m.retries.clone(),
        );
        m
    }

    /// Metrics not exported anywhere (tests).
    pub fn unregistered() -> Self {
        Self {
            config_events: Family::default(),
            rejected: Family::default(),
            rejected_current: Gauge::default(),
            warnings_current: Family::default(),
            pushes: Family::default(),
            push_triggers: Family::default(),
            debounce_time: Histogram::new([0.01, 0.1, 0.5, 1.0, 3.0, 5.0, 10.0, 20.0, 30.0]),
            kv_writes: Family::default(),
            retries: Family::default(),
        }
    }
}
