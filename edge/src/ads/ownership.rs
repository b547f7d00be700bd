//! This edge's view of ownership: who owns which proxy under the ring
//! ([`Placement`]), and the streams it relays to owners with the connections it holds to
//! them ([`Relays`]). Stream tasks, the service and the hand-off task read it; it knows
//! none of them.

use super::error::{AdsError, Ending};
use super::transport::peer::PeerConnection;
use crate::membership::Ring;
use crate::tls::client::RelayConnector;
use futures::task::AtomicWaker;
use shoal_proto::transport::Member;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tonic::Status;

/// This edge's view of ownership.
pub(crate) struct Placement {
    pub me: String,
    pub ring: watch::Receiver<Arc<Ring>>,
}

/// How long a new stream waits for this edge's first ring (the members read after it
/// registered) before it is refused with a retryable status: without the ring, the edge
/// would take the proxy as its own and move it again later.
const RING_WAIT: Duration = Duration::from_secs(5);

impl Placement {
    /// The member that owns `proxy_id`, when it is another edge; waits (within
    /// [`RING_WAIT`]) for the first ring.
    pub async fn owner_elsewhere(&self, proxy_id: &str) -> Result<Option<Member>, Status> {
        let mut ring = self.ring.clone();
        if !matches!(
            tokio::time::timeout(RING_WAIT, crate::membership::known(&mut ring)).await,
            Ok(true)
        ) {
            return Err(Status::unavailable(
                "this edge has not read the edge ring yet (membership bucket); reconnect",
            ));
        }
        let ring = ring.borrow();
        Ok(ring.owner(proxy_id).filter(|m| m.id != self.me).cloned())
    }
}

/// The streams this edge relays, and its connections to the other edges.
#[derive(Default)]
pub(crate) struct Relays {
    /// By owner address: the connections to it, each with the relays it carries.
    connections: Mutex<HashMap<String, Vec<RelayConnection>>>,
    active: Mutex<ActiveRelays>,
    next: AtomicU64,
}

/// The relayed streams, by proxy (looked up on every new stream, hand-off and drain:
/// a scan of all of them made each of those cost the edge's whole relay count).
#[derive(Default)]
struct ActiveRelays {
    /// Each proxy's ID once, shared with what holds its relay ([`Relays::insert`]).
    by_proxy: HashMap<Arc<str>, Vec<Relayed>>,
    /// The owners' IDs, one allocation each however many relays go to one: each ring
    /// change copies every relay's pair of IDs out of the lock ([`Relays::streams`]).
    owners: HashSet<Arc<str>>,
    count: usize,
}

impl ActiveRelays {
    fn owner(&mut self, id: &str) -> Arc<str> {
        if let Some(owner) = self.owners.get(id) {
            return owner.clone();
        }
        let owner: Arc<str> = Arc::from(id);
        self.owners.insert(owner.clone());
        owner
    }
}

/// One HTTP/2 connection to an owner and how many relays it carries now.
struct RelayConnection {
    peer: Arc<PeerConnection>,
    streams: Arc<AtomicUsize>,
}

/// A relay's place on a connection to its owner, given back when the relay ends.
pub(crate) struct ConnectionSlot(Arc<AtomicUsize>);

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

struct Relayed {
    id: u64,
    owner: Arc<str>,
    link: Arc<RelayLink>,
}

impl Relays {
    /// A connection to the owner at `addr` with room for one more relay, opened when
    /// every connection to it carries `per_connection` relays already. Many relays on one
    /// HTTP/2 connection share one task and one set of h2's per-connection guards: at
    /// 25k relays on one connection, the owner's h2 ended it (GOAWAY ENHANCE_YOUR_CALM,
    /// "too_many_data_frames") once the proxies' small requests waited unread, and every
    /// relay on it ended at once.
    pub fn connection(
        &self,
        addr: &str,
        tls: &RelayConnector,
        per_connection: usize,
    ) -> Result<(Arc<PeerConnection>, ConnectionSlot), String> {
        let mut pool = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        let free = pool.get(addr).and_then(|connections| {
            connections
                .iter()
                .position(|c| c.streams.load(Ordering::Relaxed) < per_connection.max(1))
        });
        let connections = match free {
            Some(_) => pool.get_mut(addr).expect("found above"),
            None => {
                // Made before the entry: an address it refuses leaves no empty pool behind.
                let peer = PeerConnection::new(addr, tls.clone())?;
                let connections = pool.entry(addr.to_string()).or_default();
                connections.push(RelayConnection {
                    peer,
                    streams: Arc::default(),
                });
                connections
            }
        };
        let connection = &connections[free.unwrap_or(connections.len() - 1)];
        connection.streams.fetch_add(1, Ordering::Relaxed);
        Ok((
            connection.peer.clone(),
            ConnectionSlot(connection.streams.clone()),
        ))
    }

    /// Relayed streams now.
    pub fn len(&self) -> usize {
        self.active().count
    }

    fn active(&self) -> std::sync::MutexGuard<'_, ActiveRelays> {
        self.active.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `(proxy, owner)` of every relayed stream.
    pub fn streams(&self) -> Vec<(Arc<str>, Arc<str>)> {
        let active = self.active();
        active
            .by_proxy
            .iter()
            .flat_map(|(proxy, relays)| relays.iter().map(|r| (proxy.clone(), r.owner.clone())))
            .collect()
    }

    /// Ends the relays of `proxy` for `why` (with a retryable status); false if none.
    pub fn end(&self, proxy: &str, why: Ending) -> bool {
        self.end_unless_to(proxy, None, why)
    }

    /// Ends the relays of `proxy` to any edge but `owner` for `why`; false if none.
    pub fn end_unless_to(&self, proxy: &str, owner: Option<&str>, why: Ending) -> bool {
        let active = self.active();
        let mut found = false;
        let relays = active.by_proxy.get(proxy).into_iter().flatten();
        for r in relays.filter(|r| Some(&*r.owner) != owner) {
            r.link.end(why);
            found = true;
        }
        found
    }

    /// Forgets the connections to edges that are not in `ring` (they left it): each
    /// closes once its last relay ends, and an edge that comes back gets a fresh one.
    /// The IDs of owners no relay goes to any more are forgotten too.
    pub fn retain_connections(&self, ring: &Ring) {
        let mut pool = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        pool.retain(|addr, _| ring.members().iter().any(|m| m.xds_addr == *addr));
        drop(pool);
        self.active()
            .owners
            .retain(|owner| Arc::strong_count(owner) > 1);
    }

    /// The edges this edge holds a relay connection to, by address.
    #[cfg(test)]
    pub fn connection_addrs(&self) -> Vec<String> {
        let pool = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        let mut addrs: Vec<String> = pool.keys().cloned().collect();
        addrs.sort();
        addrs
    }

    /// Ends every relay for `why`.
    pub fn end_all(&self, why: Ending) {
        for r in self.active().by_proxy.values().flatten() {
            r.link.end(why);
        }
    }

    /// Records a relay of `proxy` to `owner`, ended through `link`; an older relay of
    /// the same proxy is told to end ([`Ending::Replaced`]): one session per proxy ID.
    /// Returns the relay's ID and the proxy's, as kept here, to forget it by.
    pub fn insert(&self, proxy: &str, owner: &str, link: Arc<RelayLink>) -> (u64, Arc<str>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut active = self.active();
        let owner = active.owner(owner);
        let key = match active.by_proxy.get_key_value(proxy) {
            Some((key, _)) => key.clone(),
            None => Arc::from(proxy),
        };
        let relays = active.by_proxy.entry(key.clone()).or_default();
        for older in relays.iter() {
            older.link.end(Ending::Replaced);
        }
        relays.push(Relayed { id, owner, link });
        active.count += 1;
        (id, key)
    }

    /// Forgets relay `id` of `proxy` (it ended).
    pub fn remove(&self, proxy: &str, id: u64) {
        let mut active = self.active();
        let Some(relays) = active.by_proxy.get_mut(proxy) else {
            return;
        };
        let before = relays.len();
        relays.retain(|r| r.id != id);
        let removed = before - relays.len();
        if relays.is_empty() {
            active.by_proxy.remove(proxy);
        }
        active.count -= removed;
    }
}

/// What ends a relay, shared by its two bodies and [`Relays`]: why (set once), the
/// proxy's refused request when that is why, and the wakers of both bodies.
#[derive(Default)]
pub(crate) struct RelayLink {
    state: AtomicU8,
    failure: Mutex<Option<Box<Status>>>,
    /// The body of the request to the owner (the proxy's requests).
    pub up: AtomicWaker,
    /// The body of the response to the proxy (the owner's responses).
    pub down: AtomicWaker,
}

const LIVE: u8 = 0;
const HANDED_OFF: u8 = 1;
const REPLACED: u8 = 2;
const DRAINING: u8 = 3;
/// The proxy sent a request its stream cannot take.
const FAILED: u8 = 4;
/// The proxy's response ended.
const CLOSED: u8 = 5;

impl RelayLink {
    /// Ends the relay for `why`, unless it ends already.
    pub fn end(&self, why: Ending) {
        self.set(match why {
            Ending::HandedOff => HANDED_OFF,
            Ending::Replaced => REPLACED,
            Ending::Draining => DRAINING,
        });
    }

    /// Ends the relay with `status`, that of a request the proxy's stream refused.
    pub fn fail(&self, status: Status) {
        *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(status));
        self.set(FAILED);
    }

    /// The proxy's response ended: the request to the owner ends too.
    pub fn close(&self) {
        self.set(CLOSED);
    }

    pub fn ended(&self) -> bool {
        self.state.load(Ordering::Acquire) != LIVE
    }

    /// The status to end the proxy's response with, once the relay ends here.
    pub fn status(&self) -> Option<Status> {
        let why = match self.state.load(Ordering::Acquire) {
            LIVE | CLOSED => return None,
            HANDED_OFF => Ending::HandedOff,
            REPLACED => Ending::Replaced,
            DRAINING => Ending::Draining,
            _ => {
                let failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
                return Some(failure.as_deref().cloned().unwrap_or_else(|| {
                    Status::invalid_argument("the proxy sent a request its stream refused")
                }));
            }
        };
        Some(AdsError::from(why).to_status())
    }

    fn set(&self, state: u8) {
        if self
            .state
            .compare_exchange(LIVE, state, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.up.wake();
            self.down.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connector() -> RelayConnector {
        let config = rustls::ClientConfig::builder_with_provider(crate::tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        RelayConnector {
            config: Arc::new(config),
            connect_timeout: Duration::from_secs(1),
        }
    }

    fn connections(relays: &Relays, addr: &str) -> Vec<usize> {
        let pool = relays.connections.lock().unwrap();
        pool[addr]
            .iter()
            .map(|c| c.streams.load(Ordering::Relaxed))
            .collect()
    }

    #[tokio::test]
    async fn relays_fill_a_connection_before_the_next_opens_and_give_their_place_back() {
        let (relays, tls) = (Relays::default(), connector());
        let a = relays.connection("127.0.0.1:1", &tls, 2).unwrap().1;
        let b = relays.connection("127.0.0.1:1", &tls, 2).unwrap().1;
        let c = relays.connection("127.0.0.1:1", &tls, 2).unwrap().1;
        assert_eq!(connections(&relays, "127.0.0.1:1"), [2, 1]);
        // Another owner has its own connections.
        let _other = relays.connection("127.0.0.1:2", &tls, 2).unwrap().1;
        assert_eq!(connections(&relays, "127.0.0.1:2"), [1]);
        drop(a);
        assert_eq!(connections(&relays, "127.0.0.1:1"), [1, 1]);
        // A freed place is taken before another connection opens.
        let _d = relays.connection("127.0.0.1:1", &tls, 2).unwrap().1;
        assert_eq!(connections(&relays, "127.0.0.1:1"), [2, 1]);
        drop((b, c));
        assert_eq!(connections(&relays, "127.0.0.1:1"), [1, 0]);
        // An address no connection can be made to is refused and leaves no pool.
        assert!(relays.connection("not an address", &tls, 2).is_err());
        assert_eq!(relays.connection_addrs(), ["127.0.0.1:1", "127.0.0.1:2"]);
    }

    #[test]
    fn relays_are_found_by_proxy_and_a_newer_one_replaces_the_older() {
        let relays = Relays::default();
        let (first, second, other) = (
            Arc::new(RelayLink::default()),
            Arc::new(RelayLink::default()),
            Arc::new(RelayLink::default()),
        );
        let (id, _) = relays.insert("p", "b", first.clone());
        relays.insert("q", "c", other.clone());
        assert!(!first.ended());
        let (newer, _) = relays.insert("p", "c", second.clone());
        assert!(first.ended(), "the older relay of p is told to end");
        assert!(!second.ended() && !other.ended());
        assert_eq!(relays.len(), 3);
        relays.remove("p", id);
        assert_eq!(relays.len(), 2);
        // Only a relay to another edge than the owner ends.
        assert!(!relays.end_unless_to("p", Some("c"), Ending::HandedOff));
        assert!(!second.ended());
        assert!(relays.end_unless_to("p", Some("b"), Ending::HandedOff));
        assert!(second.ended() && !other.ended());
        relays.remove("p", newer);
        assert!(!relays.end("p", Ending::HandedOff));
        assert_eq!(relays.streams(), [(Arc::from("q"), Arc::from("c"))]);
        assert_eq!(relays.len(), 1);
    }

    #[test]
    fn ids_are_kept_once_and_owners_no_relay_goes_to_are_forgotten() {
        let relays = Relays::default();
        let (p, p_key) = relays.insert("p", "b", Arc::new(RelayLink::default()));
        let (q, _) = relays.insert("q", "b", Arc::new(RelayLink::default()));
        let streams = relays.streams();
        // One allocation for the owner of both; the proxy's ID returned is the one kept.
        assert!(Arc::ptr_eq(&streams[0].1, &streams[1].1));
        assert!(streams.iter().any(|(proxy, _)| Arc::ptr_eq(proxy, &p_key)));
        drop(streams);
        relays.retain_connections(&Ring::new(Vec::new()));
        assert_eq!(relays.active().owners.len(), 1, "b still has relays");
        relays.remove("p", p);
        relays.remove("q", q);
        relays.retain_connections(&Ring::new(Vec::new()));
        assert!(relays.active().owners.is_empty());
    }
}
