//! One simulated proxy: a task that holds an ADS stream and moves bytes between it and
//! its state machine ([`crate::client`]), reporting into [`Stats`].
//!
//! A stream that fails, or that the server closes, is counted and opened again after a
//! backoff (doubling to `max_backoff`, reset by a stream that served), through the
//! balancer, resuming with the versions the proxy holds.

mod balancer;
mod identity;
mod stats;
pub mod transport;

pub use balancer::{Balancer, Lb};
pub use identity::{Identity, Workloads, proxy_ip};
pub use stats::Stats;

use crate::client::{DeltaClient, Outcome, Shared, SotwClient};
use crate::secure::Security;
use crate::wire::{self, framing::Framer};
use bytes::Bytes;
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
    /// Before the first reconnect (plus up to as much again, spread by proxy); doubled
    /// on each failure in a row, up to `max_backoff`.
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// Streams one proxy opens before it gives up; `None`: never (as Envoy).
    pub max_attempts: Option<usize>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            open_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(10),
            max_message: 64 * 1024 * 1024,
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(5),
            max_attempts: None,
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
    /// Proxies placed at the mesh's endpoints (`--as-endpoints`).
    pub workloads: Option<Workloads>,
    pub limits: Limits,
    /// TLS and tokens (the default: plaintext, anonymous).
    pub security: Security,
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

impl StreamError {
    /// The edge ended the stream to hand the proxy to another edge (Shoal's retryable
    /// UNAVAILABLE "handed off: ...").
    fn is_handoff(&self) -> bool {
        matches!(
            self,
            StreamError::Transport(TransportError::GrpcStatus { code, message })
                if code == "14" && message.starts_with("handed off")
        )
    }
}

/// A state machine the task can drive.
trait AdsClient: Send {
    type Request: Message;
    const PATH: &'static str;
    fn start(&mut self, out: &mut Vec<Self::Request>);
    fn on_message(
        &mut self,
        msg: Bytes,
        out: &mut Vec<Self::Request>,
    ) -> Result<Outcome, prost::DecodeError>;
    fn expects_change(&self) -> bool;
}

impl AdsClient for SotwClient {
    type Request = DiscoveryRequest;
    const PATH: &'static str = wire::SOTW_PATH;
    fn start(&mut self, out: &mut Vec<DiscoveryRequest>) {
        SotwClient::start(self, out)
    }
    fn on_message(
        &mut self,
        msg: Bytes,
        out: &mut Vec<DiscoveryRequest>,
    ) -> Result<Outcome, prost::DecodeError> {
        SotwClient::on_message(self, msg, out)
    }
    fn expects_change(&self) -> bool {
        SotwClient::expects_change(self)
    }
}

impl AdsClient for DeltaClient {
    type Request = DeltaDiscoveryRequest;
    const PATH: &'static str = wire::DELTA_PATH;
    fn start(&mut self, out: &mut Vec<DeltaDiscoveryRequest>) {
        DeltaClient::start(self, out)
    }
    fn on_message(
        &mut self,
        msg: Bytes,
        out: &mut Vec<DeltaDiscoveryRequest>,
    ) -> Result<Outcome, prost::DecodeError> {
        DeltaClient::on_message(self, msg, out)
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
    /// Responses on every stream so far.
    responses: u64,
    /// The newest snapshot version received.
    version: u64,
    synced: bool,
    converged: bool,
    /// When the last stream that had served ended, until a later stream serves.
    lost_ns: Option<u64>,
}

/// Runs proxy `index` until `shutdown` turns true. A stream that fails or is closed by
/// the server is opened again (through `balancer`, so possibly at another edge) after a
/// backoff, resuming with what the proxy holds, as Envoy does.
pub async fn run_proxy(
    ctx: Arc<RunContext>,
    index: usize,
    balancer: Arc<Balancer>,
    mut shutdown: watch::Receiver<bool>,
) {
    let identity = Identity::new(index, ctx.namespaces, ctx.workloads.as_ref());
    let span = tracing::debug_span!("proxy", id = %identity.node_id());
    async move {
        let mut reported = Reported::default();
        if ctx.delta {
            let client = DeltaClient::new(ctx.shared.clone(), identity.node());
            reconnecting(
                &ctx,
                &identity,
                index,
                &balancer,
                client,
                &mut shutdown,
                &mut reported,
            )
            .await
        } else {
            let client = SotwClient::new(ctx.shared.clone(), identity.node());
            reconnecting(
                &ctx,
                &identity,
                index,
                &balancer,
                client,
                &mut shutdown,
                &mut reported,
            )
            .await
        }
    }
    .instrument(span)
    .await
}

/// Streams for one proxy, one after another, until shutdown (or `max_attempts`).
async fn reconnecting<C: AdsClient>(
    ctx: &RunContext,
    identity: &Identity,
    index: usize,
    balancer: &Balancer,
    mut client: C,
    shutdown: &mut watch::Receiver<bool>,
    reported: &mut Reported,
) {
    let mut backoff = ctx.limits.backoff;
    // Streams in a row that failed before any response.
    let mut failed = 0;
    for attempt in 0usize.. {
        if ctx.limits.max_attempts.is_some_and(|max| attempt >= max) {
            ctx.stats.gave_up.fetch_add(1, Relaxed);
            return;
        }
        if attempt > 0 {
            ctx.stats.reconnects.fetch_add(1, Relaxed);
            // Spread reconnects so a failed edge is not hit by every proxy at once.
            let spread = backoff.mul_f64((index % 1000) as f64 / 1000.0);
            tokio::select! {
                _ = tokio::time::sleep(backoff + spread) => {}
                _ = shutdown.wait_for(|s| *s) => return,
            }
            backoff = (backoff * 2).min(ctx.limits.max_backoff);
        }
        let pick = balancer.pick(index, attempt, failed);
        let answered = reported.responses;
        match stream(ctx, identity, pick.channel, &mut client, shutdown, reported).await {
            Ok(()) => return,
            Err(e) => {
                if *shutdown.borrow() {
                    return;
                }
                if reported.responses > answered {
                    // The stream served: the next failure starts the backoff again.
                    backoff = ctx.limits.backoff;
                    failed = 0;
                    let now = ctx.now_ns();
                    reported.lost_ns = Some(now);
                    ctx.stats.lost(now);
                } else {
                    balancer.unready(pick.edge);
                    failed += 1;
                }
                if e.is_handoff() {
                    Stats::add(&ctx.stats.handed_off, 1);
                }
                tracing::debug!(error = %e, attempt, "stream failed");
                ctx.stats.error(|| format!("{}: {e}", identity.node_id()));
            }
        }
    }
}

/// One stream's life: `Ok` on shutdown, `Err` when it fails.
async fn stream<C: AdsClient>(
    ctx: &RunContext,
    identity: &Identity,
    channel: Channel,
    client: &mut C,
    shutdown: &mut watch::Receiver<bool>,
    reported: &mut Reported,
) -> Result<(), StreamError> {
    let stats = &*ctx.stats;
    let (tx, rx) = mpsc::channel::<Bytes>(REQUEST_QUEUE);
    let mut out = Vec::with_capacity(4);
    client.start(&mut out);
    for req in out.drain(..) {
        // The queue is empty and holds more than the first requests.
        let _ = tx.try_send(wire::grpc_frame(&req));
    }
    let opened_ns = ctx.now_ns();
    let authorization = ctx
        .security
        .authorization(&identity.namespace, &identity.service_account);
    let open = transport::open(channel, C::PATH, rx, authorization);
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
        if !messages.is_empty() {
            if !reported.answered {
                reported.answered = true;
                stats.first_response(ctx.now_ns().saturating_sub(opened_ns));
            }
            if let Some(lost_ns) = reported.lost_ns.take() {
                stats.served_again(lost_ns, ctx.now_ns());
            }
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
            let outcome = client.on_message(msg, &mut out)?;
            reported.responses += 1;
            if let Some(version) = outcome.snapshot {
                if version < reported.version {
                    Stats::add(&stats.version_regressions, 1);
                    stats.sample(|| {
                        format!(
                            "{}: snapshot {version} after {}",
                            identity.node_id(),
                            reported.version
                        )
                    });
                }
                reported.version = reported.version.max(version);
            }
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
