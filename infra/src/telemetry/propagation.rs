//! A change's trace context across the tiers: injected into a [`TraceContext`] (the
//! `ChangeSet`'s, carried in bus message headers) where a change enters or moves on, and
//! extracted as the parent of the next tier's span. Both are no-ops while traces are not
//! exported.

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use shoal_proto::transport::TraceContext;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// `span`'s W3C trace context (`traceparent`, `tracestate`); empty while traces are not
/// exported or when `span` is not recorded.
pub fn inject(span: &tracing::Span) -> TraceContext {
    let mut trace = TraceContext::new();
    if !super::exporting() || span.is_disabled() {
        return trace;
    }
    let cx = span.context();
    if !opentelemetry::trace::TraceContextExt::span(&cx)
        .span_context()
        .is_valid()
    {
        return trace;
    }
    TraceContextPropagator::new().inject_context(&cx, &mut Carrier(&mut trace));
    trace
}

/// Makes the change `trace` names the parent of `span`, which must not have been entered
/// yet. Nothing happens while traces are not exported or `trace` is empty.
pub fn set_parent(span: &tracing::Span, trace: &TraceContext) {
    if !super::exporting() || trace.is_empty() || span.is_disabled() {
        return;
    }
    let cx = TraceContextPropagator::new().extract(&Fields(trace));
    // An error only means the span had started: it stays a root.
    let _ = span.set_parent(cx);
}

/// Links `span`, which must not have ended, to each change `traces` names: the changes a
/// debounced push merged into another's trace. Nothing happens while traces are not
/// exported.
pub fn add_links(span: &tracing::Span, traces: &[TraceContext]) {
    if !super::exporting() || traces.is_empty() || span.is_disabled() {
        return;
    }
    let propagator = TraceContextPropagator::new();
    for trace in traces {
        let cx = propagator.extract(&Fields(trace));
        let linked = opentelemetry::trace::TraceContextExt::span(&cx)
            .span_context()
            .clone();
        if linked.is_valid() {
            span.add_link(linked);
        }
    }
}

/// A [`TraceContext`] written by the propagator.
struct Carrier<'a>(&'a mut TraceContext);

impl Injector for Carrier<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), value);
    }
}

/// A [`TraceContext`] read by the propagator.
struct Fields<'a>(&'a TraceContext);

impl Extractor for Fields<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}
