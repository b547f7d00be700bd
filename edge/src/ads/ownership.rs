//! This edge's view of ownership: who owns which proxy under the ring
//! ([`Placement`]), and the streams it relays to owners with the connections it holds to
//! them ([`Relays`]). Stream tasks, the service and the hand-off task read it; it knows
//! none of them.

use super::error::{AdsError, Ending};
use crate::membership::Ring;
use crate::tls::client::RelayConnector;
use futures::task::AtomicWaker;
use shoal_proto::transport::Member;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tonic::Status;
use tonic::transport::{Channel, Endpoint};

const RELAY_STREAM_WINDOW: u32 = 256 * 1024;
const RELAY_CONNECTION_WINDOW: u32 = 32 * 1024 * 1024;

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
    channels: Mutex<HashMap<String, Channel>>,
    active: Mutex<HashMap<u64, Relayed>>,
    next: AtomicU64,
}

struct Relayed {
    proxy: String,
    owner: String,
    link: Arc<RelayLink>,
}

impl Relays {
    pub fn channel(&self, addr: &str, tls: &RelayConnector) -> Result<Channel, String> {
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = channels.get(addr) {
            return Ok(c.clone());
        }
        // `http`: TLS is the connector's (mTLS as the edge identity), not tonic's.
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| e.to_string())?
            .connect_timeout(Duration::from_secs(1))
            .tcp_nodelay(true)
            // Relayed responses are copied down as they arrive: a small per-stream window
            // keeps what waits in a relay small, a large connection window keeps many
            // relayed streams from waiting on each other.
            .initial_stream_window_size(RELAY_STREAM_WINDOW)
            .initial_connection_window_size(RELAY_CONNECTION_WINDOW)
            .connect_with_connector_lazy(tls.clone());
        channels.insert(addr.to_string(), channel.clone());
        Ok(channel)
    }

    /// Relayed streams now.
    pub fn len(&self) -> usize {
        self.active.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// `(proxy, owner)` of every relayed stream.
    pub fn streams(&self) -> Vec<(String, String)> {
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        active
            .values()
            .map(|r| (r.proxy.clone(), r.owner.clone()))
            .collect()
    }

    /// Ends the relays of `proxy` for `why` (with a retryable status); false if none.
    pub fn end(&self, proxy: &str, why: Ending) -> bool {
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        let mut found = false;
        for r in active.values().filter(|r| r.proxy == proxy) {
            r.link.end(why);
            found = true;
        }
        found
    }

    /// Ends the relays of `proxy` to any edge but `owner` for `why`; false if none.
    pub fn end_unless_to(&self, proxy: &str, owner: Option<&str>, why: Ending) -> bool {
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        let mut found = false;
        for r in active
            .values()
            .filter(|r| r.proxy == proxy && Some(r.owner.as_str()) != owner)
        {
            r.link.end(why);
            found = true;
        }
        found
    }

    /// Forgets the connections to edges that are not in `ring` (they left it): a
    /// channel reconnects forever, and an edge that comes back gets a fresh one.
    pub fn retain_channels(&self, ring: &Ring) {
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        channels.retain(|addr, _| ring.members().iter().any(|m| m.xds_addr == *addr));
    }

    /// The edges this edge holds a relay connection to, by address.
    #[cfg(test)]
    pub fn channel_addrs(&self) -> Vec<String> {
        let channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        let mut addrs: Vec<String> = channels.keys().cloned().collect();
        addrs.sort();
        addrs
    }

    /// Ends every relay for `why`.
    pub fn end_all(&self, why: Ending) {
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        for r in active.values() {
            r.link.end(why);
        }
    }

    /// Records a relay of `proxy` to `owner`, ended through `link`; an older relay of
    /// the same proxy is told to end ([`Ending::Replaced`]): one session per proxy ID.
    pub fn insert(&self, proxy: &str, owner: &str, link: Arc<RelayLink>) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let relayed = Relayed {
            proxy: proxy.to_string(),
            owner: owner.to_string(),
            link,
        };
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        for older in active.values().filter(|r| r.proxy == proxy) {
            older.link.end(Ending::Replaced);
        }
        active.insert(id, relayed);
        id
    }

    pub fn remove(&self, id: u64) {
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        active.remove(&id);
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
