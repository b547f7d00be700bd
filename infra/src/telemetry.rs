//! How every binary reports on itself, set up the same way in each tier from the same
//! flags ([`TelemetryArgs`], flattened into each binary's `Args`): log lines as text or
//! JSON, filtered by `RUST_LOG`, and, given `--otlp-endpoint`, one trace per config change
//! exported over OTLP/gRPC.
//!
//! ```text
//!  tracing spans ──fmt layer (RUST_LOG)──► log buffer ──(interval, full)──► stdout
//!       └─ target TRACE_TARGET ──OpenTelemetry layer (sampler)──► batch ──OTLP/gRPC──► collector
//!  ChangeSet.trace ◄─inject─ span        span ◄─set_parent─ ChangeSet.trace (next tier)
//! ```
//!
//! Without an endpoint no OpenTelemetry layer is installed and [`inject`] /
//! [`set_parent`] return at once: tracing costs nothing.

mod log_buffer;
mod propagation;
mod traces;

pub use log_buffer::{DEFAULT_BUFFER_BYTES, DEFAULT_FLUSH_INTERVAL, LogBuffer};
pub use propagation::{add_links, inject, set_parent};
pub use traces::{SamplerKind, TraceArgs, TraceError};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing::Subscriber;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, filter};

/// The target of the spans exported as a change's trace (`info_span!(target:
/// TRACE_TARGET, ..)`); other spans are logged only. `RUST_LOG` does not filter them out
/// of the trace.
pub const TRACE_TARGET: &str = "shoal::trace";

/// Whether this process installed an OpenTelemetry layer.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether change traces are exported (an endpoint was given): what holds a span for
/// longer than a call (a revision waiting for its last ACK) checks this first.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event, colored on a terminal.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, the event's fields
    /// flattened, `span` with the current span's fields), for log collectors.
    Json,
}

/// The telemetry flags every binary shares.
#[derive(Clone, Debug, clap::Args)]
pub struct TelemetryArgs {
    /// Log lines as `text` or as `json` objects, one per line.
    #[arg(long, env = "SHOAL_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log lines are gathered and written out this often (and when the buffer fills); `0s`
    /// writes each line as it is logged.
    #[arg(long, env = "SHOAL_LOG_FLUSH_INTERVAL", default_value = "50ms",
          value_parser = crate::cli::duration)]
    pub log_flush_interval: std::time::Duration,
    /// Bytes of log lines gathered before the task logging writes them out itself.
    #[arg(long, env = "SHOAL_LOG_BUFFER_BYTES", default_value_t = DEFAULT_BUFFER_BYTES,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64 * 1024 * 1024))]
    pub log_buffer_bytes: usize,
    #[command(flatten)]
    pub traces: TraceArgs,
}

impl Default for TelemetryArgs {
    fn default() -> Self {
        TelemetryArgs {
            log_format: LogFormat::default(),
            log_flush_interval: DEFAULT_FLUSH_INTERVAL,
            log_buffer_bytes: DEFAULT_BUFFER_BYTES,
            traces: TraceArgs::default(),
        }
    }
}

/// What [`init`] set up; dropping it writes out the log lines still gathered, flushes the
/// spans not exported yet (bounded by the exporter's timeout) and stops the exporter.
/// Keep it until `main` returns.
#[must_use = "dropping it stops trace export"]
#[derive(Debug, Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    /// Flushed on drop: the last lines are out before `main` returns.
    logs: Option<LogBuffer>,
}

impl Telemetry {
    /// Whether traces are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(logs) = &self.logs {
            logs.flush();
        }
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("trace export: could not flush the last spans: {e}");
        }
    }
}

/// Installs the process's subscriber: standard output (through a [`LogBuffer`] written
/// out every `--log-flush-interval`), filtered by `RUST_LOG` (default `info`), and with
/// `--otlp-endpoint` the OpenTelemetry layer exporting as `service`
/// (`shoal-ingest`, `shoal-builder`, `shoal-edge`, `shoal`; `OTEL_SERVICE_NAME` wins).
/// Call within a Tokio runtime. A second call installs nothing (tests, embedding) and
/// returns a `Telemetry` exporting nothing. The only error is an unusable endpoint.
pub fn init(args: &TelemetryArgs, service: &str) -> Result<Telemetry, TraceError> {
    let provider = args.traces.provider(service)?;
    let ansi = std::io::stdout().is_terminal();
    // Without a thread to flush it (none can be made), lines are written as they are logged.
    let logs = LogBuffer::new(std::io::stdout(), args.log_buffer_bytes);
    let logs = logs
        .spawn_flusher(args.log_flush_interval)
        .ok()
        .map(|()| logs);
    let subscriber = match &logs {
        Some(queue) => subscriber_with(args.log_format, queue.clone(), ansi, provider.as_ref()),
        None => subscriber_with(args.log_format, std::io::stdout, ansi, provider.as_ref()),
    };
    match subscriber.try_init() {
        Ok(()) => {
            EXPORTING.store(provider.is_some(), Ordering::Relaxed);
            Ok(Telemetry { provider, logs })
        }
        // A subscriber is already installed: this provider would export nothing.
        Err(_) => Ok(Telemetry::default()),
    }
}

/// The subscriber [`init`] installs without traces, writing to `writer`.
pub fn subscriber<W>(format: LogFormat, writer: W, ansi: bool) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    subscriber_with(format, writer, ansi, None)
}

/// The subscriber [`init`] installs: logs to `writer` and, given a provider, the spans of
/// [`TRACE_TARGET`] to OpenTelemetry.
pub fn subscriber_with<W>(
    format: LogFormat,
    writer: W,
    ansi: bool,
    provider: Option<&SdkTracerProvider>,
) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt::layer().with_writer(writer);
    let fmt = match format {
        LogFormat::Text => fmt.with_ansi(ansi).boxed(),
        LogFormat::Json => fmt
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .boxed(),
    };
    let registry = tracing_subscriber::registry().with(fmt.with_filter(filter));
    match provider {
        None => Box::new(registry),
        Some(provider) => {
            let otel = tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("shoal"))
                .with_tracked_inactivity(false)
                .with_threads(false)
                .with_filter(filter::filter_fn(|meta| {
                    meta.is_span() && meta.target() == TRACE_TARGET
                }));
            Box::new(registry.with(otel))
        }
    }
}

#[cfg(test)]
mod tests;
