//! OTLP trace export: the flags, the sampler and the tracer provider [`init`](super::init)
//! installs when an endpoint is given.

use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler as SdkSampler, SdkTracerProvider};
use std::time::Duration;

/// The OpenTelemetry sampler names (`OTEL_TRACES_SAMPLER`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SamplerKind {
    #[value(name = "always_on")]
    AlwaysOn,
    #[value(name = "always_off")]
    AlwaysOff,
    /// A ratio of the traces this process starts (`--trace-sampler-arg`).
    #[value(name = "traceidratio")]
    TraceIdRatio,
    #[value(name = "parentbased_always_on")]
    ParentBasedAlwaysOn,
    #[value(name = "parentbased_always_off")]
    ParentBasedAlwaysOff,
    /// The parent's decision when there is one (a change traced upstream is traced
    /// through every tier), else a ratio of the traces this process starts.
    #[default]
    #[value(name = "parentbased_traceidratio")]
    ParentBasedTraceIdRatio,
}

/// The trace flags every binary shares (inside [`TelemetryArgs`](super::TelemetryArgs)).
#[derive(Clone, Debug, clap::Args)]
pub struct TraceArgs {
    /// OTLP/gRPC collector to export traces to (e.g. `http://otel-collector:4317`): one
    /// trace per config change, from the registry event to the proxies' ACKs. Unset: no
    /// tracing export at all (and no cost).
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// Which traces are kept (OpenTelemetry's sampler names). The default keeps what an
    /// upstream tier kept and `--trace-sampler-arg` of the changes that start here.
    #[arg(long, env = "OTEL_TRACES_SAMPLER", value_enum, default_value_t = SamplerKind::ParentBasedTraceIdRatio)]
    pub trace_sampler: SamplerKind,
    /// The ratio (0.0–1.0) of the `traceidratio` samplers. Config changes are rare next to
    /// requests, so every one is traced by default (1.0).
    #[arg(long, env = "OTEL_TRACES_SAMPLER_ARG", default_value_t = 1.0, value_parser = ratio)]
    pub trace_sampler_arg: f64,
    /// `service.name` of the exported spans (default: the tier's, e.g. `shoal-edge`).
    #[arg(long, env = "OTEL_SERVICE_NAME")]
    pub service_name: Option<String>,
}

impl Default for TraceArgs {
    fn default() -> Self {
        TraceArgs {
            otlp_endpoint: None,
            trace_sampler: SamplerKind::default(),
            trace_sampler_arg: 1.0,
            service_name: None,
        }
    }
}

fn ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("{s:?} is not a ratio between 0.0 and 1.0")),
    }
}

/// Why trace export could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The endpoint is not a URL the exporter can use.
    #[error("--otlp-endpoint {endpoint:?}: {reason} (expected e.g. http://otel-collector:4317)")]
    Endpoint { endpoint: String, reason: String },
}

impl TraceArgs {
    /// The sampler these flags name.
    pub fn sampler(&self) -> SdkSampler {
        let ratio = || Box::new(SdkSampler::TraceIdRatioBased(self.trace_sampler_arg));
        match self.trace_sampler {
            SamplerKind::AlwaysOn => SdkSampler::AlwaysOn,
            SamplerKind::AlwaysOff => SdkSampler::AlwaysOff,
            SamplerKind::TraceIdRatio => SdkSampler::TraceIdRatioBased(self.trace_sampler_arg),
            SamplerKind::ParentBasedAlwaysOn => {
                SdkSampler::ParentBased(Box::new(SdkSampler::AlwaysOn))
            }
            SamplerKind::ParentBasedAlwaysOff => {
                SdkSampler::ParentBased(Box::new(SdkSampler::AlwaysOff))
            }
            SamplerKind::ParentBasedTraceIdRatio => SdkSampler::ParentBased(ratio()),
        }
    }

    /// The provider exporting to `--otlp-endpoint` in batches, as `service` unless
    /// `OTEL_SERVICE_NAME` says otherwise; `None` without an endpoint. Call within a
    /// Tokio runtime (the gRPC channel's tasks run on it); it connects lazily.
    pub fn provider(&self, service: &str) -> Result<Option<SdkTracerProvider>, TraceError> {
        let Some(endpoint) = self.otlp_endpoint.as_deref().filter(|e| !e.is_empty()) else {
            return Ok(None);
        };
        let bad = |reason: String| TraceError::Endpoint {
            endpoint: endpoint.to_owned(),
            reason,
        };
        let uri: http::Uri = endpoint.parse().map_err(|e| bad(format!("{e}")))?;
        if uri.scheme_str() == Some("https") {
            return Err(bad(
                "TLS to the collector is not supported: use http:// (a collector beside the tier)"
                    .to_owned(),
            ));
        }
        if uri.scheme_str() != Some("http") || uri.host().is_none() {
            return Err(bad("not an http:// URL".to_owned()));
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .with_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| bad(e.to_string()))?;
        let name = self
            .service_name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| service.to_owned());
        let resource = Resource::builder_empty().with_service_name(name).build();
        Ok(Some(
            SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_sampler(self.sampler())
                .with_resource(resource)
                .build(),
        ))
    }
}
