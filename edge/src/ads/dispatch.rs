//! The dispatcher: turns each snapshot update into queued pushes for the connections it
//! concerns, and hands queued pushes to their streams under the throttle.

use super::error::Ending;
use super::outbound::queue;
use super::registry::{Connection, PushJob, Registry};
use super::shared::Shared;
use crate::convergence::Revisions;
use crate::proxy::{InterceptionMode, Proxy, ProxyKind};
use crate::push_queue::{DoneGuard, PushEvent};
use crate::snapshot::SnapshotUpdate;
use shoal_infra::telemetry::{self, TRACE_TARGET};
use shoal_proto::change::ChangeSet;
use shoal_proto::push_context::{PushContext, SidecarScope};
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::mpsc;
use tracing::{debug, info, info_span, warn};

impl Shared {
    pub(crate) async fn run_dispatcher(
        self: &Arc<Self>,
        mut updates: mpsc::Receiver<SnapshotUpdate>,
        shutdown: impl Future<Output = ()>,
    ) {
        let intake = async {
            while let Some(update) = updates.recv().await {
                self.dispatch(PushEvent::from(update));
            }
        };
        let sender = async {
            while let Some((id, event, done)) = self.queue.dequeue_throttled(&self.throttle).await {
                self.deliver(id, event, done);
            }
        };
        tokio::select! {
            _ = shutdown => info!("shutting down: closing ADS streams"),
            _ = intake => warn!("snapshot updates ended: closing ADS streams"),
            _ = sender => {}
        }
        self.queue.close();
        self.draining.send_replace(true);
        self.relays.end_all(Ending::Draining);
    }

    /// Queues `event` for every connection it concerns.
    pub(crate) fn dispatch(&self, event: PushEvent) {
        let started = std::time::Instant::now();
        let version = event.push.version();
        // One span for the whole fan-out, however many proxies: counts, not a span each.
        let span = info_span!(
            target: TRACE_TARGET,
            "dispatch",
            revision = version,
            full = event.changes.full,
            changed = event.changes.keys.len(),
            connections = tracing::field::Empty,
            queued = tracing::field::Empty,
        );
        telemetry::set_parent(&span, &event.changes.trace);
        let _entered = span.enter();
        let ledger = &self.convergence;
        // The entry first: a proxy may answer before the loop ends.
        ledger.dispatched(version, &event.changes, SystemTime::now());
        let mut queued = 0usize;
        let conns = self.registry.all();
        decide(&conns, &event, |conn, push| {
            let tracked = Revisions::concerned(ledger, version);
            let event = match push {
                Push::Full => as_full(&event, tracked),
                Push::AsIs => event.tracked(tracked),
            };
            self.queue.enqueue(conn.id, event);
            queued += 1;
        });
        ledger.concerned(version, queued as u64);
        span.record("connections", conns.len());
        span.record("queued", queued);
        if telemetry::exporting() {
            // Ends when the last proxy concerned answers: the end of the change's trace.
            let converge = info_span!(
                target: TRACE_TARGET,
                parent: &span,
                "converge",
                revision = version,
                concerned = queued,
                sent = tracing::field::Empty,
                acked = tracing::field::Empty,
                nacked = tracing::field::Empty,
                gone = tracing::field::Empty,
                pending = tracing::field::Empty,
            );
            ledger.converging(version, converge);
        }
        debug!(
            revision = version,
            full = event.changes.full,
            changed = event.changes.keys.len(),
            connections = conns.len(),
            queued,
            took_us = started.elapsed().as_micros() as u64,
            "dispatched snapshot update"
        );
    }

    fn deliver(&self, id: u64, event: PushEvent, done: DoneGuard<u64, PushEvent>) {
        // A connection that is gone drops the job, and with it `done`.
        if let Some(conn) = self.registry.get(id)
            && conn.push_tx.try_send(PushJob { event, done }).is_err()
        {
            debug!(connection = %conn.conn_id(), "stream ended before its push");
        }
    }
}

/// What a connection concerned by an update is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Push {
    /// The update as it is.
    AsIs,
    /// A full push: the workload's own inbound ports changed.
    Full,
}

/// Judges `event` for every connection of `conns`, recording the scope and inbound ports
/// each now has, and calls `concerned` with those it concerns and what they are sent.
pub(crate) fn decide(
    conns: &[Arc<Connection>],
    event: &PushEvent,
    mut concerned: impl FnMut(&Connection, Push),
) {
    for conn in conns {
        let needed = needs_push(conn, event);
        if inbound_changed(conn, &event.push) {
            concerned(conn, Push::Full);
        } else if needed {
            concerned(conn, Push::AsIs);
        }
    }
}

/// Whether `event` can change the config of `conn`; records the scope it now has.
pub(crate) fn needs_push(conn: &Connection, event: &PushEvent) -> bool {
    let prev = conn.scope();
    // A scope cut from the event's own index is the one the lookup would return (scopes
    // are cached per index by namespace and selection): an endpoint change skips the
    // lookup for every connection.
    if prev.index_id == event.push.index().id {
        return proxy_needs_push(conn.proxy.kind, &prev, &prev, &event.changes);
    }
    let scope = event
        .push
        .sidecar_scope(&conn.proxy.namespace, &conn.proxy.labels);
    let prev = conn.swap_scope(scope.clone());
    proxy_needs_push(conn.proxy.kind, &prev, &scope, &event.changes)
}

/// Whether the workload behind a captured sidecar (or a router, whose Gateway ports are
/// translated by the Services in front of it) now serves other ports (its own
/// endpoints changed): its listeners and clusters change though only endpoints
/// did, so it needs a full push (Istio's `ProxyUpdate` for a pod's IP). Records the ports.
pub(crate) fn inbound_changed(conn: &Connection, push: &PushContext) -> bool {
    if !serves_inbound(conn) {
        return false;
    }
    // Judged before, against an ancestor of `push`, and none of its targets moved since.
    if conn.inbound_judged() && !push.targets_may_have_moved(&conn.proxy.ip) {
        return false;
    }
    let now = push.service_instances().inbound_ports(&conn.proxy.ip);
    match conn.swap_inbound(now.clone()) {
        Some(before) => before != now,
        // Not judged before: the stream's first response may predate these endpoints.
        None => !now.is_empty(),
    }
}

/// Records the inbound ports of a new stream's workload in `push`, read after the stream
/// was registered: its first response is at least as new, and every later update reaches
/// it through the queue, so only addresses that move from here on are looked up again.
pub(crate) fn record_inbound(conn: &Connection, push: &PushContext) {
    if serves_inbound(conn) {
        conn.swap_inbound(push.service_instances().inbound_ports(&conn.proxy.ip));
    }
}

/// A captured sidecar or a router: the proxies whose config follows their own workload's
/// service targets.
fn serves_inbound(conn: &Connection) -> bool {
    let captured =
        conn.proxy.kind == ProxyKind::Sidecar && conn.proxy.interception != InterceptionMode::None;
    captured || conn.proxy.kind == ProxyKind::Router
}

/// `event` as a full push for one connection, answering for `revisions`.
fn as_full(event: &PushEvent, revisions: Revisions) -> PushEvent {
    let mut changes = (*event.changes).clone();
    changes.full = true;
    PushEvent {
        push: event.push.clone(),
        changes: Arc::new(changes),
        revisions,
    }
}

/// Istio's `ProxyNeedsPush` for a proxy whose scope was `prev` and is `scope`: a full
/// change if its scope (now or before) depends on a changed key, an endpoint change if
/// its scope sees a changed service. A change of everything concerns everyone; routers
/// (whose config is not cut by a Sidecar scope) take every full change.
pub fn proxy_needs_push(
    kind: ProxyKind,
    prev: &Arc<SidecarScope>,
    scope: &Arc<SidecarScope>,
    changes: &ChangeSet,
) -> bool {
    if changes.is_everything() {
        return true;
    }
    if !changes.full {
        return changes.keys.iter().any(|k| scope.sees_endpoints_of(k));
    }
    if kind == ProxyKind::Router {
        return true;
    }
    let scope_changed = !Arc::ptr_eq(prev, scope);
    changes
        .keys
        .iter()
        .any(|k| scope.depends_on(k) || (scope_changed && prev.depends_on(k)))
}

/// Streams registered as the ADS service registers them, and the dispatcher's decision
/// over them without the queue: what `benches/dispatch.rs` measures.
#[doc(hidden)]
#[derive(Default)]
pub struct DecisionBench {
    registry: Registry,
}

impl DecisionBench {
    /// Registers a stream of `proxy` as `connection::serve` does, `push` being the
    /// latest snapshot.
    pub fn connect(&self, proxy: Proxy, push: &PushContext) {
        let scope = push.sidecar_scope(&proxy.namespace, &proxy.labels);
        // Nothing is sent: the stream's end of the channel is not needed.
        let (push_tx, _) = queue::channel(1);
        let conn = self.registry.insert(proxy, "sotw", scope, push_tx, false);
        record_inbound(&conn, push);
    }

    /// Decides `event` for every stream as [`Shared::dispatch`] does; returns how many
    /// it concerns and how many of those get a full push.
    pub fn decide(&self, event: &PushEvent) -> (usize, usize) {
        let (mut concerned, mut full) = (0, 0);
        decide(&self.registry.all(), event, |_, push| {
            concerned += 1;
            full += usize::from(push == Push::Full);
        });
        (concerned, full)
    }
}
