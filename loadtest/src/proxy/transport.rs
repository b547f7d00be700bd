//! HTTP/2 connections to the edges and one raw gRPC stream per proxy over them.
//!
//! Streams are opened on tonic `Channel`s (one HTTP/2 connection each, many streams per
//! connection), but the request body is fed from a bounded queue of pre-framed messages
//! and the response body is read frame by frame, so framing and buffers stay ours.

use crate::secure::Dial;
use bytes::Bytes;
use http_body::{Body as _, Frame};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;
use tonic::body::Body;
use tonic::codegen::Service;
use tonic::codegen::http::{self, HeaderValue, Method, Request, Uri, header};
use tonic::transport::{Channel, Endpoint};

/// Receive windows. Envoy defaults to 256 MiB for both, so a control plane never waits on
/// it; here a stream takes a large CDS response in one go and a connection (shared by
/// many streams) buffers enough that a briefly busy loadtest does not stall the edge.
const STREAM_WINDOW: u32 = 4 * 1024 * 1024;
const CONNECTION_WINDOW: u32 = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("invalid xDS address {addr:?}: {source}")]
    BadAddress {
        addr: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("opening the stream: {0}")]
    Open(#[source] tonic::transport::Error),
    #[error("HTTP status {0} from the xDS server")]
    HttpStatus(http::StatusCode),
    #[error("gRPC status {code} from the xDS server: {message}")]
    GrpcStatus { code: String, message: String },
    #[error("response body: {0}")]
    Body(#[source] tonic::Status),
}

/// One HTTP/2 connection to `addr` (`host:port` or a URL), plaintext or TLS per `dial`,
/// its writes gathered.
pub async fn connect(
    addr: &str,
    timeout: Duration,
    dial: &Dial,
) -> Result<Channel, TransportError> {
    endpoint(addr, timeout)?
        .connect_with_connector(dial.connector(timeout))
        .await
        .map_err(|source| TransportError::Connect {
            addr: addr.into(),
            source,
        })
}

/// A channel to `addr` that connects on first use and reconnects by itself.
pub fn connect_lazy(addr: &str, timeout: Duration, dial: &Dial) -> Result<Channel, TransportError> {
    Ok(endpoint(addr, timeout)?.connect_with_connector_lazy(dial.connector(timeout)))
}

fn endpoint(addr: &str, timeout: Duration) -> Result<Endpoint, TransportError> {
    // The connector does TLS: the URI stays http:// (tonic would refuse https:// without
    // its own TLS features).
    let uri = if addr.contains("://") {
        addr.to_string()
    } else {
        format!("http://{addr}")
    };
    Ok(Endpoint::from_shared(uri)
        .map_err(|source| TransportError::BadAddress {
            addr: addr.into(),
            source,
        })?
        .connect_timeout(timeout)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW))
}

struct QueueBody {
    rx: mpsc::Receiver<Bytes>,
}

impl http_body::Body for QueueBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.rx.poll_recv(cx).map(|m| m.map(|b| Ok(Frame::data(b))))
    }
}

/// Opens a gRPC stream at `path` whose requests come from `requests`, with
/// `authorization` (a bearer token) when given; returns the response body once the server
/// has answered with headers.
pub async fn open(
    mut channel: Channel,
    path: &'static str,
    requests: mpsc::Receiver<Bytes>,
    authorization: Option<HeaderValue>,
) -> Result<Body, TransportError> {
    let mut req = Request::new(Body::new(QueueBody { rx: requests }));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = Uri::from_static(path);
    let headers = req.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert(header::TE, HeaderValue::from_static("trailers"));
    if let Some(token) = authorization {
        headers.insert(header::AUTHORIZATION, token);
    }
    std::future::poll_fn(|cx| channel.poll_ready(cx))
        .await
        .map_err(TransportError::Open)?;
    let resp = channel.call(req).await.map_err(TransportError::Open)?;
    let (parts, body) = resp.into_parts();
    if parts.status != http::StatusCode::OK {
        return Err(TransportError::HttpStatus(parts.status));
    }
    // A refusal comes as a trailers-only response: grpc-status in the headers.
    grpc_status(&parts.headers)?;
    Ok(body)
}

/// An error for a non-OK `grpc-status` in `headers`.
pub fn grpc_status(headers: &http::HeaderMap) -> Result<(), TransportError> {
    match headers.get("grpc-status").map(|v| v.as_bytes()) {
        None | Some(b"0") => Ok(()),
        Some(code) => Err(TransportError::GrpcStatus {
            code: String::from_utf8_lossy(code).into_owned(),
            message: headers
                .get("grpc-message")
                .map(|m| percent_decode(m.as_bytes()))
                .unwrap_or_default(),
        }),
    }
}

/// `grpc-message` is percent-encoded on the wire (gRPC over HTTP/2).
fn percent_decode(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let escaped = (raw[i] == b'%')
            .then(|| raw.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match escaped {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(raw[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The next frame of a response body.
pub async fn next_frame(body: &mut Body) -> Option<Result<Frame<Bytes>, TransportError>> {
    std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx))
        .await
        .map(|r| r.map_err(TransportError::Body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_messages_are_percent_decoded() {
        let mut headers = http::HeaderMap::new();
        headers.insert("grpc-status", HeaderValue::from_static("14"));
        headers.insert(
            "grpc-message",
            HeaderValue::from_static("handed%20off%3A another edge; 100%"),
        );
        match grpc_status(&headers) {
            Err(TransportError::GrpcStatus { code, message }) => {
                assert_eq!(
                    (code.as_str(), message.as_str()),
                    ("14", "handed off: another edge; 100%")
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
