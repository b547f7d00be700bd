use super::*;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// What the subscriber wrote, shared with the test.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'w> MakeWriter<'w> for Captured {
    type Writer = Captured;

    fn make_writer(&'w self) -> Captured {
        self.clone()
    }
}

fn log_with(format: LogFormat) -> String {
    let captured = Captured::default();
    let subscriber = subscriber(format, captured.clone(), false);
    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!("push", revision = 42_u64);
        let _entered = span.enter();
        tracing::info!(
            proxy = "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local",
            "pushed"
        );
    });
    let bytes = captured.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

#[test]
fn json_lines_are_objects_with_the_events_fields_and_its_span() {
    let out = log_with(LogFormat::Json);
    let line: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["message"], "pushed");
    assert_eq!(line["proxy"], "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local");
    assert_eq!(line["span"]["name"], "push");
    assert_eq!(line["span"]["revision"], 42);
    assert!(line["timestamp"].is_string());
}

#[test]
fn text_lines_are_plain_without_color() {
    let out = log_with(LogFormat::Text);
    assert!(out.contains("INFO") && out.contains("pushed") && out.contains("revision=42"));
    assert!(!out.contains('\u{1b}'), "no ANSI escapes: {out:?}");
    assert!(serde_json::from_str::<serde_json::Value>(out.trim()).is_err());
}

/// Traces parsed from `argv` (after the binary's name).
fn trace_args(argv: &[&str]) -> TraceArgs {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        telemetry: TelemetryArgs,
    }
    let cli =
        <Cli as clap::Parser>::try_parse_from(std::iter::once("shoal").chain(argv.iter().copied()))
            .expect("flags parse");
    cli.telemetry.traces
}

/// Whether `span` is recorded by an OpenTelemetry layer (has a valid span context).
fn traced(span: &tracing::Span) -> bool {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    span.context().span().span_context().is_valid()
}

#[test]
fn without_an_endpoint_no_opentelemetry_layer_is_installed() {
    let args = TraceArgs::default();
    assert!(args.otlp_endpoint.is_none());
    assert!(args.provider("shoal").unwrap().is_none());
    let subscriber = subscriber_with(LogFormat::Text, Captured::default(), false, None);
    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!(target: TRACE_TARGET, "dispatch");
        assert!(!traced(&span), "a change span is not recorded for export");
        assert!(inject(&span).is_empty());
    });
}

#[tokio::test]
async fn with_an_endpoint_change_spans_are_exported_and_others_are_not() {
    let args = trace_args(&["--otlp-endpoint", "http://127.0.0.1:9"]);
    let provider = args.provider("shoal-edge").unwrap().expect("a provider");
    let subscriber = subscriber_with(LogFormat::Text, Captured::default(), false, Some(&provider));
    tracing::subscriber::with_default(subscriber, || {
        assert!(traced(
            &tracing::info_span!(target: TRACE_TARGET, "dispatch")
        ));
        assert!(!traced(&tracing::info_span!("connection")));
    });
    let _ = provider.shutdown_with_timeout(std::time::Duration::from_millis(100));
}

#[tokio::test]
async fn a_trace_context_carries_the_trace_to_the_next_tier() {
    let args = trace_args(&["--otlp-endpoint", "http://127.0.0.1:9"]);
    let provider = args.provider("shoal").unwrap().expect("a provider");
    let subscriber = subscriber_with(LogFormat::Text, Captured::default(), false, Some(&provider));
    EXPORTING.store(true, Ordering::Relaxed);
    tracing::subscriber::with_default(subscriber, || {
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let upstream = tracing::info_span!(target: TRACE_TARGET, "push publish");
        let trace = inject(&upstream);
        let parent = trace.get("traceparent").expect("a W3C traceparent");
        let trace_id = upstream.context().span().span_context().trace_id();
        assert!(parent.starts_with(&format!("00-{trace_id}-")), "{parent}");
        let next = tracing::info_span!(target: TRACE_TARGET, "build");
        set_parent(&next, &trace);
        assert_eq!(next.context().span().span_context().trace_id(), trace_id);
    });
    let _ = provider.shutdown_with_timeout(std::time::Duration::from_millis(100));
}

#[test]
fn samplers_take_opentelemetrys_names() {
    let args = trace_args(&[]);
    assert_eq!(args.trace_sampler, SamplerKind::ParentBasedTraceIdRatio);
    assert_eq!(args.trace_sampler_arg, 1.0);
    let args = trace_args(&[
        "--trace-sampler",
        "traceidratio",
        "--trace-sampler-arg",
        "0.01",
    ]);
    assert_eq!(args.trace_sampler, SamplerKind::TraceIdRatio);
    assert!(matches!(
        args.sampler(),
        opentelemetry_sdk::trace::Sampler::TraceIdRatioBased(r) if r == 0.01
    ));
    for name in [
        "always_on",
        "always_off",
        "parentbased_always_on",
        "parentbased_always_off",
        "parentbased_traceidratio",
    ] {
        trace_args(&["--trace-sampler", name]);
    }
}

#[test]
fn a_bad_endpoint_or_ratio_is_a_clear_error() {
    for endpoint in ["not a url", "collector:4317", "https://collector:4317"] {
        let args = trace_args(&["--otlp-endpoint", endpoint]);
        let e = args.provider("shoal").unwrap_err().to_string();
        assert!(e.starts_with("--otlp-endpoint"), "{e}");
    }
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        telemetry: TelemetryArgs,
    }
    let e = <Cli as clap::Parser>::try_parse_from(["shoal", "--trace-sampler-arg", "2"])
        .err()
        .expect("2 is not a ratio");
    assert!(e.to_string().contains("not a ratio"), "{e}");
}
