//! One simulated proxy: a task that holds an ADS stream and moves bytes between it and
//! its state machine ([`crate::client`]), reporting into [`Stats`].
//!
//! A stream that fails is counted and opened again once, after a backoff; a second
//! failure ends the proxy (`gave_up`).

mod identity;
mod stats;
pub mod transport;

pub use identity::{Identity, proxy_ip};
pub use stats::Stats;

use crate::client::{DeltaClient, Outcome, Shared, SotwClient};
use crate::wire::{self, DeltaResponse, SotwResponse, framing::Framer};
use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use prost::Message;
use stats::{Connected, Gauge};
use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tonic::transport::Channel;
use tracing::Instrument;
use transport::TransportError;

/// Requests queued per stream before the task waits for HTTP/2 to take them.
const REQUEST_QUEUE: usize = 8;

/// Bounds of one proxy's stream.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Opening a stream (until response headers).
    pub open_timeout: Duration,
    /// Queueing one request.
    pub send_timeout: Duration,
    /// The largest response accepted.
    pub max_message: usize,
    /// Before the one reconnect (plus up to as much again, spread by proxy).
    pub backoff: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            open_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(10),
            max_message: 64 * 1024 * 1024,
            backoff: Duration::from_millis(500),
        }
    }
}

/// What every proxy task of a run shares.
#[derive(Debug)]
pub struct RunContext {
    pub shared: Arc<Shared>,
    pub stats: Arc<Stats>,
    pub start: Instant,
    pub delta: bool,
    pub namespaces: usize,
    pub limits: Limits,
}

impl RunContext {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

#[derive(Debug, thiserror::Error)]
enum StreamError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("no response headers within {0:?}")]
    OpenTimeout(Duration),
    #[error("framing: {0}")]
    Frame(#[from] wire::framing::FrameError),
    #[error("response does not decode: {0}")]
    Decode(#[from] prost::DecodeError),
    #[error("the server ended the stream")]
    Ended,
    #[error("request not taken within {0:?}")]
    SendTimeout(Duration),
}

/// A state machine the task can drive.
trait AdsClient: Send {
    type Request: Message;
    type Response: Message + Default;
    const PATH: &'static str;
    fn create(shared: Arc<Shared>, node: Node) -> Self;
    fn start(&mut self, out: &mut Vec<Self::Request>);
    fn on_response(&mut self, resp: Self::Response, out: &mut Vec<Self::Request>) -> Outcome;
    fn expects_change(&self) -> bool;
}

impl AdsClient for SotwClient {
    type Request = DiscoveryRequest;
    type Response = SotwResponse;
    const PATH: &'static str = wire::SOTW_PATH;
    fn create(shared: Arc<Shared>, node: Node) -> Self {
        SotwClient::new(shared, node)
    }
    fn start(&mut self, out: &mut Vec<DiscoveryRequest>) {
        SotwClient::start(self, out)
    }
    fn on_response(&mut self, resp: SotwResponse, out: &mut Vec<DiscoveryRequest>) -> Outcome {
        SotwClient::on_response(self, resp, out)
    }
    fn expects_change(&self) -> bool {
        SotwClient::expects_change(self)
    }
}

impl AdsClient for DeltaClient {
    type Request = DeltaDiscoveryRequest;
    type Response = DeltaResponse;
    const PATH: &'static str = wire::DELTA_PATH;
    fn create(shared: Arc<Shared>, node: Node) -> Self {
        DeltaClient::new(shared, node)
    }
    fn start(&mut self, out: &mut Vec<DeltaDiscoveryRequest>) {
        DeltaClient::start(self, out)
    }
    fn on_response(
        &mut self,
        resp: DeltaResponse,
        out: &mut Vec<DeltaDiscoveryRequest>,
    ) -> Outcome {
        DeltaClient::on_response(self, resp, out)
    }
    fn expects_change(&self) -> bool {
        DeltaClient::expects_change(self)
    }
}

/// What a proxy has reported, across reconnects (each is counted once per proxy).
#[derive(Debug, Default)]
struct Reported {
    /// Got a first response (time to first response is of the first stream only).
    answered: bool,
    synced: bool,
    converged: bool,
}

/// Runs proxy `index` on `channel` until `shutdown` turns true or its stream fails twice.
pub async fn run_proxy(
    ctx: Arc<RunContext>,
    index: usize,
    channel: Channel,
    mut shutdown: watch::Receiver<bool>,
) {
    let identity = Identity::new(index, ctx.namespaces);
    let span = tracing::debug_span!("proxy", id = %identity.node_id());
    async move {
        let mut reported = Reported::default();
        for attempt in 0..2 {
            if attempt > 0 {
                ctx.stats.reconnects.fetch_add(1, Relaxed);
                // Spread reconnects so a failed edge is not hit by every proxy at once.
                let spread = ctx.limits.backoff.mul_f64((index % 1000) as f64 / 1000.0);
                tokio::select! {
                    _ = tokio::time::sleep(ctx.limits.backoff + spread) => {}
                    _ = shutdown.wait_for(|s| *s) => return,
                }
            }
            let result = if ctx.delta {
                stream::<DeltaClient>(
                    &ctx,
                    &identity,
                    channel.clone(),
                    &mut shutdown,
                    &mut reported,
                )
                .await
            } else {
                stream::<SotwClient>(
                    &ctx,
                    &identity,
                    channel.clone(),
                    &mut shutdown,
                    &mut reported,
                )
                .await
            };
            match result {
                Ok(()) => return,
                Err(e) => {
                    if *shutdown.borrow() {
                        return;
                    }
                    tracing::debug!(error = %e, attempt, "stream failed");
                    ctx.stats.error(|| format!("{}: {e}", identity.node_id()));
                }
            }
        }
        ctx.stats.gave_up.fetch_add(1, Relaxed);
    }
    .instrument(span)
    .await
}

/// One stream's life: `Ok` on shutdown, `Err` when it fails.
async fn stream<C: AdsClient>(
    ctx: &RunContext,
    identity: &Identity,
    channel: Channel,
    shutdown: &mut watch::Receiver<bool>,
    reported: &mut Reported,
) -> Result<(), StreamError> {
    let stats = &*ctx.stats;
    let mut client = C::create(ctx.shared.clone(), identity.node());
    let (tx, rx) = mpsc::channel::<Bytes>(REQUEST_QUEUE);
    let mut out = Vec::with_capacity(4);
    client.start(&mut out);
    for req in out.drain(..) {
        // The queue is empty and holds more than the first requests.
        let _ = tx.try_send(wire::grpc_frame(&req));
    }
    let opened_ns = ctx.now_ns();
    let open = transport::open(channel, C::PATH, rx);
    let mut body = tokio::select! {
        r = tokio::time::timeout(ctx.limits.open_timeout, open) => {
            r.map_err(|_| StreamError::OpenTimeout(ctx.limits.open_timeout))??
        }
        _ = shutdown.wait_for(|s| *s) => return Ok(()),
    };
    let _connected = Connected::new(&stats.connected);
    let mut expected = Gauge::new(&stats.expected);
    let mut framer = Framer::new(ctx.limits.max_message);
    let mut messages: Vec<Bytes> = Vec::new();
    loop {
        let frame = tokio::select! {
            f = transport::next_frame(&mut body) => f,
            _ = shutdown.wait_for(|s| *s) => return Ok(()),
        };
        let frame = match frame {
            None => return Err(StreamError::Ended),
            Some(f) => f?,
        };
        let data = match frame.into_data() {
            Ok(data) => data,
            Err(frame) => {
                if let Some(trailers) = frame.trailers_ref() {
                    transport::grpc_status(trailers)?;
                }
                return Err(StreamError::Ended);
            }
        };
        framer.push(data, |m| messages.push(m))?;
        if !reported.answered && !messages.is_empty() {
            reported.answered = true;
            stats.first_response(ctx.now_ns().saturating_sub(opened_ns));
        }
        for msg in messages.drain(..) {
            let len = (msg.len() + wire::framing::HEADER_LEN) as u64;
            Stats::add(&stats.responses, 1);
            Stats::add(&stats.bytes_received, len);
            if stats.changed.load(Acquire) {
                Stats::add(&stats.pushes, 1);
                Stats::add(&stats.push_bytes, len);
                if !client.expects_change() {
                    Stats::add(&stats.pushes_unneeded, 1);
                }
            }
            let resp = C::Response::decode(msg)?;
            let outcome = client.on_response(resp, &mut out);
            if let Some(e) = &outcome.nack {
                Stats::add(&stats.nacks, 1);
                stats.sample(|| format!("{} NACK: {e}", identity.node_id()));
            }
            for req in out.drain(..) {
                let frame = wire::grpc_frame(&req);
                tokio::time::timeout(ctx.limits.send_timeout, tx.send(frame))
                    .await
                    .map_err(|_| StreamError::SendTimeout(ctx.limits.send_timeout))?
                    .map_err(|_| StreamError::Ended)?;
            }
            // Timed once the ACK is on its way.
            if outcome.synced && !reported.synced {
                reported.synced = true;
                stats.synced(ctx.now_ns());
            }
            if outcome.converged && !reported.converged {
                reported.converged = true;
                stats.converged(ctx.now_ns(), client.expects_change());
            }
            expected.set(client.expects_change());
        }
    }
}
