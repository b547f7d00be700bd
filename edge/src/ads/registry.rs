//! The connected proxies: what the dispatcher enumerates and `/debug/syncz` shows.

use super::error::Ending;
use super::outbound::queue;
use super::scope::short_type;
use super::status::{Statuses, TypeStatus};
use crate::proxy::{InterceptionMode, Proxy, ProxyKind};
use crate::push_queue::{DoneGuard, PushEvent};
use serde_json::{Value, json};
use shoal_proto::push_context::{InboundPort, SidecarScope};
use std::collections::HashMap;
use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard};
use std::time::SystemTime;
use tokio::sync::Notify;

/// A push handed to a stream; dropping it (with `done`) ends the push in the queue.
pub(crate) struct PushJob {
    pub event: PushEvent,
    pub done: DoneGuard<u64, PushEvent>,
}

/// One connected stream.
pub(crate) struct Connection {
    pub id: u64,
    /// Shared with the stream's state machine.
    pub proxy: Arc<Proxy>,
    pub protocol: &'static str,
    pub connected_at: SystemTime,
    pub push_tx: queue::Sender<PushJob>,
    /// The proxy's kind, whether it serves inbound (a captured sidecar or a router, whose
    /// config follows its own workload's service targets) and a hash of its address
    /// ([`address_hash`]): copied here so that the dispatcher's pass over every
    /// connection reads this struct and not the proxy too.
    pub kind: ProxyKind,
    pub serves_inbound: bool,
    pub address_hash: u64,
    /// The scope the last update was judged against (Istio's `PrevSidecarScope`).
    scope: Mutex<Arc<SidecarScope>>,
    /// The workload's inbound ports the last update was judged against (`None` before
    /// the first).
    inbound: Mutex<Option<Arc<[InboundPort]>>>,
    /// The stream's sync state, published by its task after every step. Locks, not
    /// watch channels: nobody waits for a change, and a channel's state cost ~350 B per
    /// stream.
    status: RwLock<Statuses>,
    /// Set once to end the stream with a retryable status: handed off or replaced.
    ending: OnceLock<Ending>,
    /// Wakes the stream's task when `ending` is set.
    ending_set: Notify,
    /// Relayed here by another edge: that edge moves it on a ring change, not this one.
    pub relayed_in: bool,
}

/// Displays a connection's ID.
struct ConnId<'a>(&'a Connection);

impl std::fmt::Display for ConnId<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.0.proxy.id, self.0.id)
    }
}

impl Connection {
    /// Istio's connection ID, `<proxy id>-<n>` (written out when shown, not kept).
    pub fn conn_id(&self) -> impl std::fmt::Display + '_ {
        ConnId(self)
    }

    /// Whether an update has judged the workload's inbound ports yet.
    pub fn inbound_judged(&self) -> bool {
        self.inbound
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Calls `judge` with the scope the last update was judged against, for it to
    /// replace with the scope the update gives, in one lock.
    pub fn with_scope<T>(&self, judge: impl FnOnce(&mut Arc<SidecarScope>) -> T) -> T {
        judge(&mut self.scope.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Records `ports` as the workload's inbound ports and returns the previous ones.
    pub fn swap_inbound(&self, ports: Arc<[InboundPort]>) -> Option<Arc<[InboundPort]>> {
        let mut s = self.inbound.lock().unwrap_or_else(|e| e.into_inner());
        s.replace(ports)
    }

    pub fn publish(&self, status: Statuses) {
        // The statuses replaced are dropped after the lock is released.
        let old = std::mem::replace(
            &mut *self.status.write().unwrap_or_else(|e| e.into_inner()),
            status,
        );
        drop(old);
    }

    /// The stream's sync state as last published (`/debug/syncz` and CSDS read it here).
    /// Hold it briefly: the stream's next publish waits for it.
    pub fn status(&self) -> RwLockReadGuard<'_, Statuses> {
        self.status.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends the stream with a retryable status, so the proxy reconnects elsewhere.
    pub fn hand_off(&self) {
        self.end(Ending::HandedOff);
    }

    /// Asks the stream's task to end it for `why` (the first reason given wins).
    pub fn end(&self, why: Ending) {
        if self.ending.set(why).is_ok() {
            self.ending_set.notify_waiters();
        }
    }

    /// Resolves, with the reason, once the stream is to end.
    pub fn ending(self: &Arc<Self>) -> impl Future<Output = Ending> + Send + 'static + use<> {
        let conn = self.clone();
        async move {
            loop {
                let notified = conn.ending_set.notified();
                let mut notified = std::pin::pin!(notified);
                // Registered before the check, so that an `end` between the two wakes it.
                notified.as_mut().enable();
                if let Some(why) = conn.ending.get() {
                    return *why;
                }
                notified.await;
            }
        }
    }

    fn syncz(&self) -> Value {
        let scope = self
            .scope
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .id
            .clone();
        let types: serde_json::Map<String, Value> = self
            .status()
            .iter()
            .map(|t| {
                let key = match short_type(&t.type_url) {
                    "other" => t.type_url.to_string(),
                    short => short.to_string(),
                };
                let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
                if let Value::Object(o) = &mut v {
                    o.insert("state".into(), t.state().into());
                }
                (key, v)
            })
            .collect();
        let connected_at_ms = self
            .connected_at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or_default();
        json!({
            "proxy": self.proxy.id,
            "connection_id": self.conn_id().to_string(),
            "protocol": self.protocol,
            "namespace": self.proxy.namespace,
            // Who the stream proved to be: a SPIFFE ID and how (jwt, client-certificate),
            // or none on plaintext.
            "identity": self.proxy.identity.principal().map(|p| p.spiffe_id()),
            "auth_method": self.proxy.identity.method().as_str(),
            "sidecar_scope": scope,
            "connected_at_unix_ms": connected_at_ms,
            "types": types,
        })
    }
}

/// A captured sidecar or a router: the proxies whose config follows their own workload's
/// service targets.
fn serves_inbound(proxy: &Proxy) -> bool {
    let captured = proxy.kind == ProxyKind::Sidecar && proxy.interception != InterceptionMode::None;
    captured || proxy.kind == ProxyKind::Router
}

/// A hash of a workload address, the same for equal addresses in this process.
pub fn address_hash(address: &str) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    h.write(address.as_bytes());
    h.finish()
}

/// The connected streams, by connection and by proxy ID.
#[derive(Default)]
pub(crate) struct Registry {
    conns: RwLock<Conns>,
    next_id: AtomicU64,
}

/// Keyed with foldhash, seeded per process (proxy IDs come from proxies), as the
/// interning pools are: every stream registers and is looked up, and std's SipHash
/// rehashed every key each time a map grew.
#[derive(Default)]
struct Conns {
    /// Every live stream, by connection id (what the push queue names).
    by_id: HashMap<u64, Arc<Connection>, foldhash::fast::RandomState>,
    /// The newest stream of each proxy: where placement and handoff find a proxy. A
    /// proxy that reconnects before its old stream ends has both in `by_id` (until the
    /// old one, told to end, is gone), and the new one here.
    by_proxy: HashMap<String, Arc<Connection>, foldhash::fast::RandomState>,
}

impl Registry {
    /// Registers a stream; an older stream of the same proxy is told to end
    /// ([`Ending::Replaced`]): one session per proxy ID.
    pub fn insert(
        &self,
        proxy: impl Into<Arc<Proxy>>,
        protocol: &'static str,
        scope: Arc<SidecarScope>,
        push_tx: queue::Sender<PushJob>,
        relayed_in: bool,
    ) -> Arc<Connection> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let proxy = proxy.into();
        let conn = Arc::new(Connection {
            id,
            kind: proxy.kind,
            serves_inbound: serves_inbound(&proxy),
            address_hash: address_hash(&proxy.ip),
            proxy,
            protocol,
            connected_at: SystemTime::now(),
            push_tx,
            scope: Mutex::new(scope),
            inbound: Mutex::new(None),
            status: RwLock::new(Vec::new()),
            ending: OnceLock::new(),
            ending_set: Notify::new(),
            relayed_in,
        });
        let mut conns = self.write();
        conns.by_id.insert(id, conn.clone());
        let older = conns.by_proxy.insert(conn.proxy.id.clone(), conn.clone());
        drop(conns);
        if let Some(older) = older {
            older.end(Ending::Replaced);
        }
        conn
    }

    /// Forgets connection `id`; its proxy's entry too, unless a newer stream holds it.
    pub fn remove(&self, id: u64) {
        let mut conns = self.write();
        if let Some(conn) = conns.by_id.remove(&id)
            && conns
                .by_proxy
                .get(&conn.proxy.id)
                .is_some_and(|c| c.id == id)
        {
            conns.by_proxy.remove(&conn.proxy.id);
        }
    }

    pub fn get(&self, id: u64) -> Option<Arc<Connection>> {
        self.read().by_id.get(&id).cloned()
    }

    /// The newest stream of `proxy_id`.
    pub fn proxy(&self, proxy_id: &str) -> Option<Arc<Connection>> {
        self.read().by_proxy.get(proxy_id).cloned()
    }

    /// Connections this edge itself placed (not relayed in by another edge).
    pub fn placed_here(&self) -> Vec<Arc<Connection>> {
        self.read()
            .by_proxy
            .values()
            .filter(|c| !c.relayed_in)
            .cloned()
            .collect()
    }

    /// The IDs of the proxies connected here.
    pub fn proxy_ids(&self) -> Vec<String> {
        self.read().by_proxy.keys().cloned().collect()
    }

    /// A snapshot of every connection (the lock is not held while they are used).
    pub fn all(&self) -> Vec<Arc<Connection>> {
        self.read().by_id.values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.read().by_id.len()
    }

    /// Calls `visit` with the newest stream of each proxy connected here and its sync
    /// state (what CSDS answers); the registry's lock is not held meanwhile.
    pub fn visit_proxies(&self, visit: &mut dyn FnMut(&Proxy, &[Arc<TypeStatus>])) {
        let newest: Vec<Arc<Connection>> = self.read().by_proxy.values().cloned().collect();
        for conn in newest {
            visit(&conn.proxy, &conn.status());
        }
    }

    /// Per connected proxy: identity and per-type sync state, by connection id.
    pub fn syncz(&self) -> Value {
        let mut conns = self.all();
        conns.sort_by_key(|c| c.id);
        Value::Array(conns.iter().map(|c| c.syncz()).collect())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Conns> {
        self.conns.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Conns> {
        self.conns.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::Proxy;
    use shoal_proto::push_context::PushContext;

    fn proxy(id: &str) -> Proxy {
        let node = crate::ads::testing::node(id);
        crate::proxy::from_node(Some(&node), Default::default()).unwrap()
    }

    #[test]
    fn a_reconnected_proxy_keeps_its_newest_stream() {
        let registry = Registry::default();
        let scope = PushContext::empty().sidecar_scope("ns", &Default::default());
        let id = "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local";
        let ((tx1, _rx1), (tx2, _rx2)) = (queue::channel(1), queue::channel(1));
        let old = registry.insert(proxy(id), "sotw", scope.clone(), tx1, false);
        let new = registry.insert(proxy(id), "sotw", scope, tx2, false);
        assert_eq!(registry.len(), 2);
        assert_eq!(registry.proxy_ids(), [id]);
        registry.remove(old.id);
        assert_eq!(registry.proxy_ids(), [id], "the old stream ending");
        registry.remove(new.id);
        assert!(registry.proxy_ids().is_empty());
        assert_eq!(registry.len(), 0);
    }
}
