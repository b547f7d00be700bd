//! The ADS server's bounds and timings. Defaults follow Istio; the edge binary maps each to
//! the environment variable named on its field.

use shoal_proto::security::SpiffeId;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct XdsConfig {
    /// `SHOAL_PUSH_THROTTLE`: pushes in flight across all streams (Istio's
    /// `PILOT_PUSH_THROTTLE`).
    pub push_throttle: usize,
    /// `SHOAL_SEND_TIMEOUT`: how long one response may wait for the stream; a stream that
    /// exceeds it is closed (Istio's `PILOT_XDS_SEND_TIMEOUT`).
    pub send_timeout: Duration,
    /// `SHOAL_XDS_STREAM_BUFFER`: chunks of responses (up to two each) one stream may
    /// have waiting, queued or in HTTP/2 not yet written to its connection; beyond it
    /// sends wait, so a proxy that stops reading meets the send timeout.
    pub stream_buffer: usize,
    /// `SHOAL_XDS_MAX_STREAMS`: concurrent ADS streams (SotW and Delta together); beyond
    /// it new streams are refused with RESOURCE_EXHAUSTED.
    pub max_streams: usize,
    /// `SHOAL_XDS_MAX_REQUEST_BYTES`: the largest request accepted.
    pub max_request_bytes: usize,
    /// `SHOAL_XDS_FIRST_REQUEST_TIMEOUT`: how long a new stream may take to send its first
    /// request (which names the proxy).
    pub first_request_timeout: Duration,
    /// `SHOAL_MAX_REQUESTS_PER_SECOND`: new streams admitted per second (Istio's
    /// `PILOT_MAX_REQUESTS_PER_SECOND`); one that waits over a second for its turn is
    /// refused with RESOURCE_EXHAUSTED and retries elsewhere. 0: no rate limit.
    pub max_requests_per_second: f64,
    /// `SHOAL_XDS_INITIAL_THROTTLE`: first responses of new streams generated at once
    /// (the push throttle's twin for connection storms); the others wait their turn.
    pub initial_throttle: usize,
    /// `SHOAL_XDS_RESUME_WAIT`: a request that reports a snapshot newer than this edge
    /// holds (a proxy that moved from an edge further ahead) waits up to this long for
    /// the edge to catch up, so the proxy never goes back to an older config.
    pub resume_wait: Duration,
    /// `SHOAL_XDS_MAX_NAMES_PER_STREAM`: resource names one stream may subscribe to, over
    /// all its types (SotW and Delta); a request that would exceed it closes the stream
    /// with RESOURCE_EXHAUSTED.
    pub max_names_per_stream: usize,
    /// `SHOAL_PUSH_STATUS_REVISIONS`: config revisions whose convergence this edge keeps
    /// for `/debug/push_status` (the latest ones; older revisions are reported forgotten).
    pub push_status_revisions: usize,
    /// `SHOAL_XDS_MAX_RESETS_PER_CONNECTION`: streams one HTTP/2 connection may see reset
    /// by the edge for its peer's protocol errors before the edge closes it (h2's guard
    /// against MadeYouReset, CVE-2025-8671). h2 counts over the connection's life, and a
    /// connection from another edge carries every relayed stream's churn, so the default
    /// is far above h2's 1,024. 0: no limit.
    pub max_resets_per_connection: usize,
    /// `SHOAL_RELAY_STREAMS_PER_CONNECTION`: relayed streams one HTTP/2 connection to an
    /// owner carries; more open another connection to it.
    pub relay_streams_per_connection: usize,
    /// `SHOAL_RELAY_OPEN_TIMEOUT`: how long a relay waits for the owner to take the stream
    /// before the proxy is told to reconnect. An owner that is down refuses at once (or
    /// within the 5 s connect timeout) and the proxy is served here; one busy with a
    /// connection storm can take a minute, and a proxy sent away only comes back to wait
    /// again. Serving those here instead moved them again at the next re-home: at 100k
    /// proxies over 4 edges on 2 cores, 65k hand-offs and 229k reconnects, the storm
    /// feeding itself. So this bounds only an owner that is alive but never answers.
    pub relay_open_timeout: Duration,
    /// `SHOAL_RELAY_CONNECTIONS`: a proxy's whole connection is tunneled to its owner
    /// (the first stream's node decides), its bytes copied both ways; off: each stream is
    /// relayed on its own, its messages re-framed.
    pub relay_connections: bool,
    /// `SHOAL_RELAY_PRELUDE_BYTES`: what is read of a connection, at most, to find its
    /// first stream's node; beyond it the connection is served here.
    pub relay_prelude_bytes: usize,
    /// `SHOAL_TUNNEL_BUFFER_BYTES`: what the owner's HTTP/2 server may have written to a
    /// tunnel that the tunnel has not sent yet; beyond it the server waits.
    pub tunnel_buffer_bytes: usize,
    /// `SHOAL_WRITE_COALESCE_BYTES`: a served connection's writes are gathered up to this
    /// many bytes before they go out (h2 writes each 16 KiB frame by itself otherwise),
    /// the buffer freed once written. 0: written as they come.
    pub write_coalesce_bytes: usize,
    /// `SHOAL_ACCEPT_QUEUE`: accepted (and tunneled) connections waiting for the HTTP/2
    /// server to take them, per listener.
    pub accept_queue: usize,
    /// The SPIFFE ID every edge's certificate names (`--trust-domain`,
    /// `--system-namespace`, `--service-account`): relays are taken only from a peer that
    /// presents it, and made only to an owner that does.
    pub edge_identity: SpiffeId,
}

/// The edge identity by default: `spiffe://cluster.local/ns/istio-system/sa/shoal-edge`.
pub fn default_edge_identity() -> SpiffeId {
    SpiffeId::new("cluster.local", "istio-system", "shoal-edge")
}

impl Default for XdsConfig {
    fn default() -> Self {
        XdsConfig {
            push_throttle: 100,
            send_timeout: Duration::from_secs(5),
            stream_buffer: 8,
            max_streams: 20_000,
            max_request_bytes: 4 * 1024 * 1024,
            first_request_timeout: Duration::from_secs(30),
            max_requests_per_second: 0.0,
            initial_throttle: 100,
            resume_wait: Duration::from_secs(3),
            max_names_per_stream: super::limits::DEFAULT_MAX_NAMES,
            push_status_revisions: 256,
            max_resets_per_connection: 1_000_000,
            relay_streams_per_connection: 256,
            relay_open_timeout: Duration::from_secs(120),
            relay_connections: true,
            // Istio's first request carries the node's metadata: a few KiB, tens with
            // many labels and annotations.
            relay_prelude_bytes: 64 * 1024,
            tunnel_buffer_bytes: 64 * 1024,
            write_coalesce_bytes: 64 * 1024,
            accept_queue: 1024,
            edge_identity: default_edge_identity(),
        }
    }
}
