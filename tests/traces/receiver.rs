//! An in-test OTLP receiver: a stand-in for an OpenTelemetry Collector, serving the OTLP/gRPC
//! `TraceService/Export` the tiers' exporters call and keeping every span it is sent.
//!
//! What it reproduces: the gRPC service and messages a collector's `otlp` receiver
//! accepts (the `opentelemetry-proto` types), each resource's `service.name`, spans with
//! their ids, parents and attributes, arriving in batches in any order. What it does not:
//! OTLP over HTTP, compression, partial-success answers, back-pressure (it never refuses),
//! processors and exporters behind the receiver.

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// One span as received.
#[derive(Clone, Debug)]
pub struct Span {
    pub service: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a trace's root.
    pub parent_id: String,
    pub name: String,
    pub attributes: BTreeMap<String, String>,
    /// `(trace ID, span ID)` of each span this one links to.
    pub links: Vec<(String, String)>,
}

/// The receiver's address and what it received so far.
#[derive(Clone)]
pub struct Receiver {
    pub addr: SocketAddr,
    spans: Arc<Mutex<Vec<Span>>>,
}

#[derive(Clone)]
struct Service(Arc<Mutex<Vec<Span>>>);

#[tonic::async_trait]
impl TraceService for Service {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut received = Vec::new();
        for resource_spans in request.into_inner().resource_spans {
            let resource = attributes(
                resource_spans
                    .resource
                    .map(|r| r.attributes)
                    .unwrap_or_default(),
            );
            let service = resource.get("service.name").cloned().unwrap_or_default();
            for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
                received.push(Span {
                    service: service.clone(),
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_id: hex(&span.parent_span_id),
                    name: span.name,
                    attributes: attributes(span.attributes),
                    links: span
                        .links
                        .iter()
                        .map(|l| (hex(&l.trace_id), hex(&l.span_id)))
                        .collect(),
                });
            }
        }
        self.0.lock().unwrap().extend(received);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attributes(kvs: Vec<KeyValue>) -> BTreeMap<String, String> {
    kvs.into_iter()
        .map(|kv| {
            let value = match kv.value.and_then(|AnyValue { value }| value) {
                Some(any_value::Value::StringValue(s)) => s,
                Some(any_value::Value::IntValue(i)) => i.to_string(),
                Some(any_value::Value::BoolValue(b)) => b.to_string(),
                Some(any_value::Value::DoubleValue(d)) => d.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key, value)
        })
        .collect()
}

impl Receiver {
    /// Serves on a free port of 127.0.0.1 until the test's runtime ends.
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the receiver");
        let addr = listener.local_addr().unwrap();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let service = TraceServiceServer::new(Service(spans.clone()));
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await
                .expect("the receiver serves");
        });
        Receiver { addr, spans }
    }

    /// The endpoint to give `--otlp-endpoint`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }
}
