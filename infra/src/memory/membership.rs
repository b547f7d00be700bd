//! `MemoryMembership`: heartbeats in a map, each live for the TTL after its last beat.

use super::lock;
use async_trait::async_trait;
use shoal_proto::transport::{Member, Membership, Result};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

pub struct MemoryMembership {
    ttl: Duration,
    members: Mutex<BTreeMap<String, (Member, Instant)>>,
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
        }
    }
}

#[async_trait]
impl Membership for MemoryMembership {
    async fn heartbeat(&self, member: &Member) -> Result<()> {
        let expires = Instant::now() + self.ttl;
        lock(&self.members).insert(member.id.clone(), (member.clone(), expires));
        Ok(())
    }

    async fn leave(&self, id: &str) -> Result<()> {
        lock(&self.members).remove(id);
        Ok(())
    }

    async fn members(&self) -> Result<Vec<Member>> {
        let mut members = lock(&self.members);
        let now = Instant::now();
        members.retain(|_, (_, expires)| *expires > now);
        // BTreeMap by id: already sorted.
        Ok(members.values().map(|(m, _)| m.clone()).collect())
    }
}
