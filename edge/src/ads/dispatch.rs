//! The dispatcher: turns each snapshot update into queued pushes for the connections it
//! concerns, and hands queued pushes to their streams under the throttle.

use super::error::Ending;
use super::outbound::queue;
use super::registry::{Connection, PushJob, Registry, address_hash};
use super::shared::Shared;
use crate::convergence::Revisions;
use crate::proxy::{Proxy, ProxyKind};
use crate::push_queue::{DoneGuard, PushEvent};
use crate::snapshot::SnapshotUpdate;
use shoal_infra::telemetry::{self, TRACE_TARGET};
use shoal_proto::change::ChangeSet;
use shoal_proto::push_context::{PushContext, SidecarScope};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
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
                slowest_proxy = tracing::field::Empty,
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
    let mut judge = Judge::new(event);
    let moved = Moved::of(&event.push);
    for conn in conns {
        let needed = judge.needs_push(conn);
        if judge_inbound(conn, &event.push, &moved) {
            concerned(conn, Push::Full);
        } else if needed {
            concerned(conn, Push::AsIs);
        }
    }
}

/// Whether `event` can change the config of `conn`; records the scope it now has.
#[cfg(test)]
pub(crate) fn needs_push(conn: &Connection, event: &PushEvent) -> bool {
    Judge::new(event).needs_push(conn)
}

/// One update's decisions, each made once for every connection that must get the same:
/// a scope is a function of the index, the proxies' namespace and (only where a Sidecar
/// or a DestinationRule there selects by label) their labels; a decision, of the proxy's
/// kind and its scopes before and after. Per connection, what is left is a lookup by
/// address.
struct Judge<'a> {
    event: &'a PushEvent,
    /// By (scope before, kind): the scope after and the decision, where every proxy of
    /// the namespace gets one scope; `None` where labels may set them apart.
    by_prev: HashMap<(usize, ProxyKind), Option<Judged>, BuildAddressHasher>,
    /// By (scope before, scope after, kind): the decision, where labels set them apart.
    by_pair: HashMap<(usize, usize, ProxyKind), Judged, BuildAddressHasher>,
}

/// Hashes keys made of addresses and small integers (Fx's multiply-rotate): they need no
/// defence against chosen collisions, and SipHash was a fifth of the pass.
#[derive(Default)]
struct AddressHasher(u64);

type BuildAddressHasher = BuildHasherDefault<AddressHasher>;

impl Hasher for AddressHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A decision and the scopes it was made for.
struct Judged {
    /// Held until the update is decided: a scope dropped meanwhile could leave its
    /// address, which keys the decision, to a new one.
    _prev: Arc<SidecarScope>,
    scope: Arc<SidecarScope>,
    needed: bool,
}

impl Judged {
    fn new(
        kind: ProxyKind,
        prev: &Arc<SidecarScope>,
        scope: Arc<SidecarScope>,
        changes: &ChangeSet,
    ) -> Self {
        Judged {
            needed: proxy_needs_push(kind, prev, &scope, changes),
            _prev: prev.clone(),
            scope,
        }
    }
}

impl<'a> Judge<'a> {
    fn new(event: &'a PushEvent) -> Self {
        Judge {
            event,
            by_prev: HashMap::default(),
            by_pair: HashMap::default(),
        }
    }

    /// Whether the update can change the config of `conn`; records the scope it now has.
    fn needs_push(&mut self, conn: &Connection) -> bool {
        let (event, kind) = (self.event, conn.kind);
        conn.with_scope(|scope| {
            let group = (self.by_prev)
                .entry((Arc::as_ptr(scope) as usize, kind))
                .or_insert_with(|| Self::judge_group(event, conn, scope));
            if let Some(judged) = group {
                if !Arc::ptr_eq(scope, &judged.scope) {
                    *scope = judged.scope.clone();
                }
                return judged.needed;
            }
            let next = event
                .push
                .sidecar_scope(&conn.proxy.namespace, &conn.proxy.labels);
            let key = (
                Arc::as_ptr(scope) as usize,
                Arc::as_ptr(&next) as usize,
                kind,
            );
            let needed = (self.by_pair.entry(key))
                .or_insert_with(|| Judged::new(kind, scope, next.clone(), &event.changes))
                .needed;
            *scope = next;
            needed
        })
    }

    /// The scope after and the decision for every connection of `conn`'s kind whose scope
    /// was `prev`, or `None` if their labels may give them different scopes.
    fn judge_group(
        event: &PushEvent,
        conn: &Connection,
        prev: &Arc<SidecarScope>,
    ) -> Option<Judged> {
        let (index, kind) = (event.push.index(), conn.kind);
        // A scope cut from the event's own index is the one the lookup would return
        // (scopes are cached per index by namespace and selection): an endpoint change
        // cuts nothing.
        if prev.index_id == index.id {
            return Some(Judged::new(kind, prev, prev.clone(), &event.changes));
        }
        // `prev` was cut for the proxies' own namespace: every connection keyed here is
        // in it.
        if index.selects_by_labels(&conn.proxy.namespace) {
            return None;
        }
        let scope = index.sidecar_scope(&conn.proxy.namespace, &conn.proxy.labels);
        Some(Judged::new(kind, prev, scope, &event.changes))
    }
}

/// Whether the workload behind a captured sidecar (or a router, whose Gateway ports are
/// translated by the Services in front of it) now serves other ports (its own
/// endpoints changed): its listeners and clusters change though only endpoints
/// did, so it needs a full push (Istio's `ProxyUpdate` for a pod's IP). Records the ports.
#[cfg(test)]
pub(crate) fn inbound_changed(conn: &Connection, push: &PushContext) -> bool {
    judge_inbound(conn, push, &Moved::of(push))
}

/// [`inbound_changed`], with the addresses `push` may have moved read once for every
/// connection.
fn judge_inbound(conn: &Connection, push: &PushContext, moved: &Moved) -> bool {
    if !conn.serves_inbound {
        return false;
    }
    // Judged before, against an ancestor of `push`, and none of its targets moved since.
    if conn.inbound_judged() && !moved.may_have_moved(conn, push) {
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
    if conn.serves_inbound {
        conn.swap_inbound(push.service_instances().inbound_ports(&conn.proxy.ip));
    }
}

/// The workload addresses an update may have moved, as [`address_hash`]es sorted: asked
/// for every connection without reading its address, which only a matching hash needs.
enum Moved {
    Every,
    Hashes(Vec<u64>),
}

impl Moved {
    fn of(push: &PushContext) -> Self {
        match push.moved_addresses() {
            None => Moved::Every,
            Some(moved) => {
                let mut hashes: Vec<u64> = moved.iter().map(|a| address_hash(a)).collect();
                hashes.sort_unstable();
                Moved::Hashes(hashes)
            }
        }
    }

    /// [`PushContext::targets_may_have_moved`] for `conn`'s address.
    fn may_have_moved(&self, conn: &Connection, push: &PushContext) -> bool {
        match self {
            Moved::Every => true,
            Moved::Hashes(hashes) => {
                hashes.binary_search(&conn.address_hash).is_ok()
                    && push.targets_may_have_moved(&conn.proxy.ip)
            }
        }
    }
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

#[cfg(test)]
mod tests;
