//! How every binary reports on itself, set up the same way in each tier from the same
//! flags ([`TelemetryArgs`], flattened into each binary's `Args`): log lines as text or
//! JSON, filtered by `RUST_LOG`.

use std::io::IsTerminal;
use tracing::Subscriber;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::util::SubscriberInitExt;

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
#[derive(Clone, Debug, Default, clap::Args)]
pub struct TelemetryArgs {
    /// Log lines as `text` or as `json` objects, one per line.
    #[arg(long, env = "SHOAL_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Installs the process's subscriber: standard output, filtered by `RUST_LOG` (default
/// `info`). A second call is a no-op, so tests and binaries may both call it.
pub fn init(args: &TelemetryArgs) {
    let ansi = std::io::stdout().is_terminal();
    // Ignored error: a subscriber is already installed (tests, embedding).
    let _ = subscriber(args.log_format, std::io::stdout, ansi).try_init();
}

/// The subscriber [`init`] installs, writing to `writer`.
pub fn subscriber<W>(format: LogFormat, writer: W, ansi: bool) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    match format {
        LogFormat::Text => Box::new(builder.with_ansi(ansi).finish()),
        LogFormat::Json => Box::new(
            builder
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(false)
                .finish(),
        ),
    }
}

#[cfg(test)]
mod tests;
