//! Trace context travels as NATS headers, so it can be read without decoding the payload.

use async_nats::{HeaderMap, HeaderName, HeaderValue};
use shoal_proto::transport::TraceContext;

/// Entries that are not valid header names or values are skipped (and logged): tracing
/// must never fail a publish.
pub(super) fn to_headers(trace: &TraceContext) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in trace {
        match (name.parse::<HeaderName>(), value.parse::<HeaderValue>()) {
            (Ok(name), Ok(value)) => headers.insert(name, value),
            _ => tracing::debug!(%name, "trace entry is not a valid NATS header; skipped"),
        }
    }
    headers
}

/// Every header but the server's own (`Nats-*`) and the KV operation marker.
pub(super) fn from_headers(headers: Option<&HeaderMap>) -> TraceContext {
    let mut trace = TraceContext::new();
    for (name, values) in headers.into_iter().flat_map(HeaderMap::iter) {
        let name: &str = name.as_ref();
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("nats-") || lower == "kv-operation" {
            continue;
        }
        if let Some(value) = values.first() {
            trace.insert(name.to_owned(), value.as_str().to_owned());
        }
    }
    trace
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_round_trips_and_server_headers_are_dropped() {
        let trace = TraceContext::from([
            ("traceparent".to_owned(), "00-abc-def-01".to_owned()),
            ("tracestate".to_owned(), "k=v".to_owned()),
        ]);
        let mut headers = to_headers(&trace);
        headers.insert("Nats-Msg-Id", "1");
        assert_eq!(from_headers(Some(&headers)), trace);
        assert!(from_headers(None).is_empty());
    }
}
