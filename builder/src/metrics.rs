use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    /// `full`, `incremental` or `noop`.
    pub kind: &'static str,
}

#[derive(Clone)]
pub struct Metrics {
    pub builds: Family<BuildLabels, Counter>,
    pub build_seconds: Histogram,
    pub write_seconds: Histogram,
    pub chunks_written: Counter,
    pub bytes_written: Counter,
    pub write_errors: Counter,
    pub restores: Counter,
    pub snapshot_version: Gauge,
    /// Build time of the last snapshot written (Unix seconds, as its manifest carries it):
    /// `max(this) - shoal_edge_snapshot_timestamp_seconds` is an edge's lag in seconds.
    pub snapshot_timestamp: Gauge<f64, AtomicU64>,
    pub replica_revision: Gauge,
    pub replica_objects: Gauge,
    pub config_errors: Counter,
}

impl Metrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Metrics {
            builds: Family::default(),
            build_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
            write_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
            chunks_written: Counter::default(),
            bytes_written: Counter::default(),
            write_errors: Counter::default(),
            restores: Counter::default(),
            snapshot_version: Gauge::default(),
            snapshot_timestamp: Gauge::default(),
            replica_revision: Gauge::default(),
            replica_objects: Gauge::default(),
            config_errors: Counter::default(),
        };
        let r = registry.sub_registry_with_prefix("shoal_builder");
        r.register("builds", "Snapshot builds by kind", m.builds.clone());
        r.register(
            "build_duration_seconds",
            "Time to build a snapshot's chunks",
            m.build_seconds.clone(),
        );
        r.register(
            "write_duration_seconds",
            "Time to write a snapshot to the store",
            m.write_seconds.clone(),
        );
        r.register(
            "chunks_written",
            "Chunks written to the store",
            m.chunks_written.clone(),
        );
        r.register(
            "bytes_written",
            "Bytes written to the store",
            m.bytes_written.clone(),
        );
        r.register(
            "write_errors",
            "Snapshot writes that failed (retried in process)",
            m.write_errors.clone(),
        );
        r.register(
            "restores",
            "Times the store had lost the latest snapshot and it was written again",
            m.restores.clone(),
        );
        r.register(
            "snapshot_version",
            "Version of the last snapshot written",
            m.snapshot_version.clone(),
        );
        r.register(
            "snapshot_timestamp_seconds",
            "Build time of the last snapshot written, in Unix seconds (from its manifest)",
            m.snapshot_timestamp.clone(),
        );
        r.register(
            "replica_revision",
            "Config KV revision the replica reflects",
            m.replica_revision.clone(),
        );
        r.register(
            "replica_objects",
            "Objects in the config replica",
            m.replica_objects.clone(),
        );
        r.register(
            "config_errors",
            "Config KV entries that could not be read",
            m.config_errors.clone(),
        );
        m
    }
}
