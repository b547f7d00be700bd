//! The task behind one ADS stream: it owns the stream's state machine and moves bytes
//! between it, the proxy and the push queue. Nothing here decides protocol questions.

use super::body::AdsBody;
use super::dispatch::record_inbound;
use super::error::{AdsError, Ending};
use super::outbound::{self, Outbound};
use super::protocol::Protocol;
use super::registry::{Connection, PushJob};
use super::relay;
use super::scope::{PushScope, short_type};
use super::shared::Shared;
use super::source::GeneratorSource;
use super::status::RequestKind;
use super::transport::RequestStream;
use crate::convergence::InFlight;
use crate::proxy::Proxy;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::value::Kind;
use futures::{Stream, StreamExt};
use shoal_proto::security::{
    Authenticator, AuthnError, Credentials, Identity, NodeClaim, check_node_claim,
};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{OwnedSemaphorePermit, oneshot};
use tonic::Status;
use tracing::{Instrument, debug, info, warn};

/// Who a new stream is, or how to find out.
pub(crate) enum Who {
    /// It presents credentials to `authenticator`; `secure`: over TLS, where a stream that
    /// proves nothing is refused.
    Presents {
        authenticator: Arc<dyn Authenticator>,
        credentials: Credentials,
        secure: bool,
    },
    /// Relayed by another edge (proven by its certificate), which authenticated it.
    Relayed(Identity),
}

#[cfg(test)]
impl Who {
    /// A plaintext stream.
    pub fn anonymous() -> Who {
        Who::Presents {
            authenticator: Arc::new(shoal_proto::security::authn::Anonymous),
            credentials: Credentials::default(),
            secure: false,
        }
    }
}

/// Admits a stream: authenticates what it presents, reads its first request, identifies
/// the proxy, checks its node against its identity and starts its task.
pub(crate) async fn accept<M, S>(
    shared: &Arc<Shared>,
    mut inbound: S,
    who: Who,
) -> Result<AdsBody, Status>
where
    M: Protocol,
    S: RequestStream + Stream<Item = Result<M::Request, Status>>,
{
    if *shared.draining.borrow() || shared.refusing.load(Ordering::Acquire) {
        return Err(AdsError::ShuttingDown.into());
    }
    admit(shared).await?;
    let permit = shared
        .streams
        .clone()
        .try_acquire_owned()
        .map_err(|_| AdsError::TooManyStreams(shared.config.max_streams))?;
    // After admission, so that a refused stream costs no token review.
    let (identity, relayed_in) = match who {
        Who::Relayed(identity) => (identity, true),
        Who::Presents {
            authenticator,
            credentials,
            secure,
        } => {
            let identity = authenticator
                .authenticate(&credentials)
                .await
                .map_err(AdsError::from)?;
            if secure && identity.principal().is_none() {
                return Err(AdsError::Unauthenticated(AuthnError::Missing(
                    "this port serves only authenticated streams",
                ))
                .into());
            }
            (identity, false)
        }
    };
    let first =
        match tokio::time::timeout(shared.config.first_request_timeout, inbound.next()).await {
            // Held through admission and a relay's opening: nothing of it may pin the
            // connection's read buffer meanwhile.
            Ok(Some(Ok(req))) => M::held(req),
            Ok(Some(Err(status))) => return Err(status),
            Ok(None) => return Err(Status::cancelled("stream closed before its first request")),
            Err(_) => {
                return Err(Status::deadline_exceeded(format!(
                    "no request within {:?} of opening the stream \
                 (SHOAL_XDS_FIRST_REQUEST_TIMEOUT)",
                    shared.config.first_request_timeout
                )));
            }
        };
    let node = M::node(&first);
    let proxy = crate::proxy::from_node(node, identity).map_err(AdsError::from)?;
    let claim = NodeClaim {
        namespace: &proxy.namespace,
        service_account: node_service_account(node),
    };
    check_node_claim(&proxy.identity, &claim).map_err(AdsError::from)?;
    // Another edge owns the proxy: its stream is relayed there, unless it was relayed
    // here already or the owner cannot take it.
    let owner = match (relayed_in, shared.placement.get()) {
        (false, Some(placement)) => placement.owner_elsewhere(&proxy.id).await?,
        _ => None,
    };
    let (first, inbound, permit) = match owner {
        Some(owner) => {
            match relay::relay::<M, S>(shared, owner, &proxy, first, inbound, permit).await {
                Ok(relayed) => return Ok(relayed.into()),
                Err(relay::Unrelayed::ServeHere(back)) => back,
                Err(relay::Unrelayed::OwnerBusy(status)) => return Err(status),
            }
        }
        None => (first, inbound, permit),
    };
    let (out_tx, out_rx) = outbound::channel(shared.config.stream_buffer.max(1));
    let (close_tx, close_rx) = oneshot::channel();
    let span = tracing::info_span!(
        "ads",
        protocol = M::NAME,
        proxy = %proxy.id,
        conn = tracing::field::Empty,
    );
    tokio::spawn(
        serve::<M, S>(
            shared.clone(),
            Box::new(Opened {
                proxy,
                first: Box::new(first),
                inbound,
                out: out_tx,
                close: close_tx,
                admitted: Admitted {
                    _permit: permit,
                    relayed_in,
                },
            }),
        )
        .instrument(span),
    );
    Ok(Outbound::new(out_rx, close_rx, shared.metrics.queued_bytes.clone()).into())
}

/// The node's metadata `SERVICE_ACCOUNT`, where it gives one.
fn node_service_account(node: Option<&Node>) -> Option<&str> {
    let field = node?.metadata.as_ref()?.fields.get(SERVICE_ACCOUNT)?;
    match &field.kind {
        Some(Kind::StringValue(sa)) if !sa.is_empty() => Some(sa),
        _ => None,
    }
}

/// The node metadata key of the proxy's service account (pilot-agent sets it).
const SERVICE_ACCOUNT: &str = "SERVICE_ACCOUNT";

/// Waits for the stream's turn under `--max-requests-per-second` (Istio's
/// `PILOT_MAX_REQUESTS_PER_SECOND`); after a second it is refused so that the proxy
/// retries, at another edge in the best case.
async fn admit(shared: &Shared) -> Result<(), AdsError> {
    let Some(admission) = &shared.admission else {
        return Ok(());
    };
    let deadline = Instant::now() + ADMISSION_WAIT;
    loop {
        let wait = {
            let mut pacer = admission.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            if pacer.take(now, 1) == 1 {
                return Ok(());
            }
            pacer.wait(now).max(Duration::from_millis(1))
        };
        if Instant::now() + wait > deadline {
            shared.metrics.rate_limited.inc();
            return Err(AdsError::RateLimited(shared.config.max_requests_per_second));
        }
        tokio::time::sleep(wait).await;
    }
}

/// How long a new stream may wait for admission before it is refused (as Istio).
const ADMISSION_WAIT: Duration = Duration::from_secs(1);

/// A stream admitted here, to serve: given to [`serve`] in one box, as an `async fn`
/// keeps room for each of its arguments, besides the locals they move to, for its whole
/// life (the stream's). `first` is boxed so that the future keeps no room for a request.
pub(crate) struct Opened<M: Protocol, S> {
    pub proxy: Proxy,
    pub first: Box<M::Request>,
    pub inbound: S,
    pub out: outbound::Sender,
    pub close: oneshot::Sender<Status>,
    pub admitted: Admitted,
}

/// Serves one stream until the proxy leaves, a send times out or the edge drains; an
/// error closes the response stream with its status.
pub(crate) async fn serve<M, S>(shared: Arc<Shared>, opened: Box<Opened<M, S>>)
where
    M: Protocol,
    S: Stream<Item = Result<M::Request, Status>> + Unpin + Send,
{
    let Opened {
        proxy,
        first,
        mut inbound,
        out,
        close,
        admitted,
    } = *opened;
    let (push_tx, push_rx) = outbound::queue::channel(1);
    let proxy = Arc::new(proxy);
    // Registered before the first request reads the snapshot: an update after this point
    // reaches the stream through the queue, one before it is in the snapshot it reads.
    let scope = shared
        .latest()
        .sidecar_scope(&proxy.namespace, &proxy.labels);
    let conn = shared
        .registry
        .insert(proxy.clone(), M::NAME, scope, push_tx, admitted.relayed_in);
    record_inbound(&conn, &shared.latest());
    tracing::Span::current().record("conn", conn.id);
    // One session per proxy ID: a relay of the same proxy from this edge ends too.
    shared.relays.end(&conn.proxy.id, Ending::Replaced);
    shared.metrics.connected.inc();
    let _registered = Registered {
        shared: shared.clone(),
        id: conn.id,
    };
    info!(connection = %conn.conn_id(), "proxy connected");

    let mut task = StreamTask::<M> {
        machine: M::new(proxy, shared.config.max_names_per_stream),
        shared: shared.clone(),
        conn: conn.clone(),
        out,
        in_flight: InFlight::default(),
    };
    // By reference: moved, it would take room in this future and again in the loop's.
    match task.run(first, &mut inbound, push_rx).await {
        Ok(()) | Err(Stop::Ads(AdsError::ClientGone)) => info!("proxy disconnected"),
        Err(Stop::Ads(e)) => {
            warn!(error = %e, "closing stream");
            let _ = close.send(e.to_status());
        }
        Err(Stop::BadRequest(status)) => {
            warn!(%status, "closing stream on a request it cannot take");
            let _ = close.send(status);
        }
    }
}

/// What admission gave a stream to serve.
pub(crate) struct Admitted {
    /// Its place under `--max-streams`, held for the stream's life.
    pub _permit: OwnedSemaphorePermit,
    /// Relayed here by another edge (which moves it on a ring change).
    pub relayed_in: bool,
}

/// Handling one request or push.
type Step<'a> = Pin<Box<dyn Future<Output = Result<(), AdsError>> + Send + 'a>>;

/// Why a stream task ends early.
enum Stop {
    Ads(AdsError),
    /// The proxy sent a request the transport refused (compressed, too large, malformed).
    BadRequest(Status),
}

impl From<AdsError> for Stop {
    fn from(e: AdsError) -> Self {
        Stop::Ads(e)
    }
}

/// Forgets a connection however its task ends (a panic included).
struct Registered {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.shared.registry.remove(self.id);
        self.shared.queue.remove(&self.id);
        self.shared.metrics.connected.dec();
    }
}

struct StreamTask<M: Protocol> {
    machine: M,
    shared: Arc<Shared>,
    conn: Arc<Connection>,
    out: outbound::Sender,
    /// The push awaiting the proxy's answer, for per-revision convergence.
    in_flight: InFlight,
}

impl<M: Protocol> StreamTask<M> {
    /// Waits (up to `resume_wait`) until this edge holds snapshot `reported` or newer: a
    /// proxy that moved here from an edge further ahead must not get an older config.
    /// Still behind a snapshot it knows exists (announced, not pulled yet: a loaded edge),
    /// it sends the proxy back to keep its config and retry; behind one it does not know
    /// of (the store was reset, say), it serves what it holds.
    async fn catch_up(&self, reported: u64) -> Result<(), AdsError> {
        if self.shared.latest().version() >= reported {
            return Ok(());
        }
        let mut snapshots = self.shared.snapshots.clone();
        let wait = self.shared.config.resume_wait;
        let caught_up =
            tokio::time::timeout(wait, snapshots.wait_for(|push| push.version() >= reported)).await;
        if matches!(caught_up, Ok(Ok(_))) {
            return Ok(());
        }
        let held = self.shared.latest().version();
        if self.shared.knows_of(reported) {
            return Err(AdsError::Behind { reported, held });
        }
        warn!(
            reported,
            held,
            "the proxy reports a snapshot this edge does not know of, not reached within {wait:?}; serving what it holds"
        );
        Ok(())
    }

    async fn run<S>(
        &mut self,
        first: Box<M::Request>,
        mut inbound: S,
        mut pushes: outbound::queue::Receiver<PushJob>,
    ) -> Result<(), Stop>
    where
        S: Stream<Item = Result<M::Request, Status>> + Unpin + Send,
    {
        let mut draining = self.shared.draining.subscribe();
        let mut ending = std::pin::pin!(self.conn.ending());
        {
            // Caught up before taking a turn: a turn held through the resume wait would
            // hold up the streams behind it.
            if let Some(reported) = M::reported_snapshot(&first) {
                Box::pin(self.catch_up(reported)).await?;
            }
            // A storm of new streams generates its first responses a bounded number at a
            // time; the rest wait here, holding only their first request.
            let _turn = self.shared.initial.clone().acquire_owned().await;
            Box::pin(self.on_request(*first)).await?;
        }
        loop {
            // What to do next is chosen without awaiting, and done in a boxed future: the
            // task's own future, resident for the stream's life, then holds only this loop
            // (not a request, nor the much larger state of handling one).
            let step: Step<'_> = tokio::select! {
                biased;
                _ = async { drop(draining.wait_for(|d| *d).await) } => {
                    return Err(AdsError::ShuttingDown.into());
                }
                why = &mut ending => return Err(AdsError::from(why).into()),
                job = pushes.recv() => match job {
                    Some(job) => Box::pin(self.on_push(job)),
                    None => return Err(AdsError::ShuttingDown.into()),
                },
                req = inbound.next() => match req {
                    Some(Ok(req)) => Box::pin(self.on_request(req)),
                    Some(Err(status)) => return Err(Stop::BadRequest(status)),
                    None => {
                        debug!("the proxy closed its request stream");
                        return Ok(());
                    }
                },
            };
            step.await?;
        }
    }

    async fn on_request(&mut self, req: M::Request) -> Result<(), AdsError> {
        if let Some(reported) = M::reported_snapshot(&req) {
            self.catch_up(reported).await?;
        }
        let push = self.shared.latest();
        let reply = {
            let src = GeneratorSource {
                generator: &self.shared.generator,
                push: &push,
            };
            self.machine.on_request(&src, &req)?
        };
        let type_url = M::type_url(&req);
        match &reply.kind {
            RequestKind::Nack(message) => {
                self.shared.metrics.rejected(type_url);
                // The revision rejected: the version this edge sent (SotW and Delta alike),
                // as the stream last published it.
                let revision = self
                    .conn
                    .status()
                    .iter()
                    .find(|s| s.type_url == type_url)
                    .map(|s| s.version_sent.to_string())
                    .unwrap_or_default();
                warn!(r#type = short_type(type_url), %revision, %message, "proxy rejected config");
            }
            RequestKind::Stale => self.shared.metrics.expired_nonce(type_url),
            RequestKind::Unsupported => {
                self.shared.metrics.unsupported_type.inc();
                warn!(%type_url, "ignoring a request for a resource type this edge does not serve");
            }
            _ => {}
        }
        for (type_url, error) in &reply.errors {
            self.shared.metrics.push_context_errors.inc();
            warn!(%type_url, %error, "cannot generate requested resources");
        }
        for resp in reply.responses {
            self.send(resp).await?;
        }
        let status = self.machine.status();
        self.in_flight.answered(&status, &self.conn.proxy.id);
        self.conn.publish(status);
        Ok(())
    }

    async fn on_push(&mut self, job: PushJob) -> Result<(), AdsError> {
        let PushJob { event, done } = job;
        // Never go back: a newer snapshot may have been read by a request meanwhile.
        let latest = self.shared.latest();
        let push = if latest.version() > event.push.version() {
            latest
        } else {
            event.push.clone()
        };
        let scope = PushScope::of(&event);
        for type_url in scope.types() {
            let started = Instant::now();
            let generated = {
                let src = GeneratorSource {
                    generator: &self.shared.generator,
                    push: &push,
                };
                self.machine.push_type(&src, type_url, &scope)
            };
            match generated {
                Ok(Some(resp)) => {
                    self.send(resp).await?;
                    self.shared.metrics.push_time(type_url, started.elapsed());
                }
                Ok(None) => {}
                Err(error) => {
                    self.shared.metrics.push_context_errors.inc();
                    warn!(%type_url, %error, revision = push.version(), "push failed for type");
                }
            }
        }
        let convergence = SystemTime::now()
            .duration_since(event.start())
            .unwrap_or_default();
        self.shared
            .metrics
            .convergence
            .observe(convergence.as_secs_f64());
        let after = self.machine.status();
        {
            // The status published after the last step is the state before this push:
            // comparing the two tells which responses this push sent.
            let before = self.conn.status();
            self.in_flight
                .pushed(event.revisions, &before, &after, &self.conn.proxy.id);
        }
        self.conn.publish(after);
        drop(done);
        Ok(())
    }

    /// Encodes `resp` (its own bytes in one exact-size chunk before the shared ones, the
    /// response itself dropped before waiting) and hands it to the stream.
    async fn send(&self, resp: M::Response) -> Result<(), AdsError> {
        let encoded = M::encode(&resp);
        let type_url = M::response_type_url(&resp).to_string();
        drop(resp);
        let timeout = self.shared.config.send_timeout;
        let started = Instant::now();
        // The message's chunks back to back: only this task sends on the stream.
        let send = async {
            for chunk in encoded.chunks() {
                self.out.send(chunk).await?;
            }
            Ok::<_, outbound::Closed>(())
        };
        match tokio::time::timeout(timeout, send).await {
            Ok(Ok(())) => {
                let m = &self.shared.metrics;
                m.send_time.observe(started.elapsed().as_secs_f64());
                m.pushed(&type_url);
                Ok(())
            }
            Ok(Err(_)) => Err(AdsError::ClientGone),
            Err(_) => {
                self.shared.metrics.write_timeout.inc();
                Err(AdsError::SendTimeout(timeout))
            }
        }
    }
}
