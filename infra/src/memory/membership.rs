//! `MemoryMembership`: heartbeats in a map, each live for the TTL after its last beat;
//! watchers get the live members, then every beat and leave, as from the NATS bucket.

use super::lock;
use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::{self, BoxStream};
use shoal_proto::transport::{Member, MemberEvent, Membership, Result, TransportError};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::broadcast;
use tokio::time::Instant;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;

/// Events a watcher may fall behind by before it gets `Lagged` (and watches again).
const WATCH_BUFFER: usize = 1024;

pub struct MemoryMembership {
    ttl: Duration,
    members: Mutex<BTreeMap<String, (Member, Instant)>>,
    /// Sent to under the `members` lock, so a watcher's replay and its events never
    /// overlap or miss one.
    events: broadcast::Sender<MemberEvent>,
}

impl Default for MemoryMembership {
    /// The same 15 s TTL as the NATS membership bucket.
    fn default() -> Self {
        Self::new(Duration::from_secs(15))
    }
}

impl MemoryMembership {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            members: Mutex::default(),
            events: broadcast::channel(WATCH_BUFFER).0,
        }
    }
}

#[async_trait]
impl Membership for MemoryMembership {
    async fn heartbeat(&self, member: &Member) -> Result<()> {
        let expires = Instant::now() + self.ttl;
        let mut members = lock(&self.members);
        members.insert(member.id.clone(), (member.clone(), expires));
        let _ = self.events.send(MemberEvent::Beat {
            member: member.clone(),
            live_for: self.ttl,
        });
        Ok(())
    }

    async fn leave(&self, id: &str) -> Result<()> {
        let mut members = lock(&self.members);
        if members.remove(id).is_some() {
            let _ = self.events.send(MemberEvent::Left { id: id.into() });
        }
        Ok(())
    }

    async fn members(&self) -> Result<Vec<Member>> {
        let mut members = lock(&self.members);
        let now = Instant::now();
        members.retain(|_, (_, expires)| *expires > now);
        // BTreeMap by id: already sorted.
        Ok(members.values().map(|(m, _)| m.clone()).collect())
    }

    async fn watch(&self) -> Result<BoxStream<'static, Result<MemberEvent>>> {
        let (replay, events) = {
            let members = lock(&self.members);
            let now = Instant::now();
            let replay: Vec<Result<MemberEvent>> = members
                .values()
                .filter(|(_, expires)| *expires > now)
                .map(|(member, expires)| {
                    Ok(MemberEvent::Beat {
                        member: member.clone(),
                        live_for: expires.saturating_duration_since(now),
                    })
                })
                .chain([Ok(MemberEvent::Current)])
                .collect();
            (replay, self.events.subscribe())
        };
        let events = BroadcastStream::new(events)
            .map(|e| e.map_err(|BroadcastStreamRecvError::Lagged(n)| TransportError::Lagged(n)));
        Ok(stream::iter(replay).chain(events).boxed())
    }
}
