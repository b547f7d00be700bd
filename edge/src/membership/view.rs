//! What one edge knows of the members, without I/O: fed by the membership watch, it
//! yields a ring only once a watch has replayed the whole bucket (after this edge's own
//! registration), and expires members whose heartbeats stopped.

use super::Ring;
use shoal_proto::transport::{Member, MemberEvent};
use std::collections::BTreeMap;
use tokio::time::Instant;

#[derive(Debug)]
pub struct View {
    me: Member,
    /// Live members and when each expires; complete once a watch reported `Current`.
    /// A new watch's replay refreshes them rather than replacing them: after a lost
    /// watch (a NATS restart loses the bucket) a member that has not beaten again yet is
    /// still live until its TTL, so the ring does not shrink and grow back.
    live: BTreeMap<String, (Member, Instant)>,
    complete: bool,
}

impl View {
    pub fn new(me: Member) -> Self {
        View {
            me,
            live: BTreeMap::new(),
            complete: false,
        }
    }

    pub fn apply(&mut self, event: MemberEvent, now: Instant) {
        match event {
            MemberEvent::Beat { member, live_for } => {
                if !live_for.is_zero() {
                    self.live
                        .insert(member.id.clone(), (member, now + live_for));
                }
            }
            MemberEvent::Left { id } => {
                self.live.remove(&id);
            }
            MemberEvent::Current => self.complete = true,
        }
    }

    /// Forgets members whose last beat is older than their TTL.
    pub fn expire(&mut self, now: Instant) {
        self.live.retain(|_, (_, expires)| *expires > now);
    }

    /// When the next member expires, if any does.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.live.values().map(|(_, expires)| *expires).min()
    }

    /// The ring, once a watch has reported every member; this edge is always in it (its
    /// own beat may be late to come back, or lost with a restarted server).
    pub fn ring(&self) -> Option<Ring> {
        self.complete.then(|| {
            let members = self.live.values().map(|(m, _)| m.clone());
            Ring::new(members.chain([self.me.clone()]).collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// How long a member whose beat was just read stays live without another.
    const TTL: Duration = Duration::from_secs(15);

    fn member(id: &str) -> Member {
        Member {
            id: id.into(),
            xds_addr: format!("{id}:15010"),
        }
    }

    fn beat(id: &str) -> MemberEvent {
        MemberEvent::Beat {
            member: member(id),
            live_for: TTL,
        }
    }

    fn ids(ring: &Ring) -> Vec<&str> {
        ring.members().iter().map(|m| m.id.as_str()).collect()
    }

    #[test]
    fn no_ring_until_the_replay_is_complete() {
        let now = Instant::now();
        let mut view = View::new(member("edge-2"));
        view.apply(beat("edge-2"), now);
        assert_eq!(view.ring(), None, "not every member read yet");
        view.apply(beat("edge-1"), now);
        view.apply(MemberEvent::Current, now);
        assert_eq!(ids(&view.ring().unwrap()), ["edge-1", "edge-2"]);
    }

    #[test]
    fn beats_and_leaves_after_the_replay_change_the_ring() {
        let now = Instant::now();
        let mut view = View::new(member("edge-1"));
        view.apply(MemberEvent::Current, now);
        assert_eq!(ids(&view.ring().unwrap()), ["edge-1"], "always itself");
        view.apply(beat("edge-2"), now);
        assert_eq!(ids(&view.ring().unwrap()), ["edge-1", "edge-2"]);
        view.apply(
            MemberEvent::Left {
                id: "edge-2".into(),
            },
            now,
        );
        assert_eq!(ids(&view.ring().unwrap()), ["edge-1"]);
    }

    #[test]
    fn a_silent_member_expires_and_a_replayed_one_keeps_only_its_remaining_life() {
        let now = Instant::now();
        let mut view = View::new(member("edge-1"));
        view.apply(
            MemberEvent::Beat {
                member: member("old"),
                live_for: Duration::from_secs(2),
            },
            now,
        );
        view.apply(beat("edge-3"), now);
        view.apply(MemberEvent::Current, now);
        assert_eq!(view.next_expiry(), Some(now + Duration::from_secs(2)));
        view.expire(now + Duration::from_secs(3));
        assert_eq!(ids(&view.ring().unwrap()), ["edge-1", "edge-3"]);
        view.expire(now + TTL);
        assert_eq!(ids(&view.ring().unwrap()), ["edge-1"]);
    }

    #[test]
    fn a_rewatch_keeps_members_until_they_expire_or_leave() {
        let now = Instant::now();
        let mut view = View::new(member("edge-1"));
        view.apply(beat("edge-2"), now);
        view.apply(beat("gone"), now);
        view.apply(beat("silent"), now);
        view.apply(MemberEvent::Current, now);
        // A new watch (the server restarted): edge-2 has beaten again, `gone` left,
        // `silent` has not beaten yet.
        let later = now + Duration::from_secs(5);
        view.apply(beat("edge-2"), later);
        view.apply(MemberEvent::Left { id: "gone".into() }, later);
        view.apply(MemberEvent::Current, later);
        assert_eq!(ids(&view.ring().unwrap()), ["edge-1", "edge-2", "silent"]);
        view.expire(now + TTL);
        assert_eq!(ids(&view.ring().unwrap()), ["edge-1", "edge-2"]);
    }
}
