use shoal_proto::transport::Member;

/// The live edges, and who owns which proxy (rendezvous / highest-random-weight hashing:
/// no virtual nodes to tune, and only the proxies of a joining or leaving member move).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ring {
    members: Vec<Member>,
}

impl Ring {
    pub fn new(mut members: Vec<Member>) -> Self {
        members.sort_by(|a, b| a.id.cmp(&b.id));
        members.dedup_by(|a, b| a.id == b.id);
        Ring { members }
    }

    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The member that owns `proxy_id`; `None` on an empty ring.
    pub fn owner(&self, proxy_id: &str) -> Option<&Member> {
        self.members
            .iter()
            .max_by_key(|m| (score(&m.id, proxy_id), &m.id))
    }

    pub fn owns(&self, member_id: &str, proxy_id: &str) -> bool {
        self.owner(proxy_id).is_none_or(|m| m.id == member_id)
    }
}

/// A stable 64-bit score: FNV-1a over both IDs, then a SplitMix64 finalizer for
/// avalanche. Stable across processes and builds, unlike `DefaultHasher`.
fn score(member: &str, proxy: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in member.bytes().chain([0xff]).chain(proxy.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(n: usize) -> Ring {
        Ring::new(
            (0..n)
                .map(|i| Member {
                    id: format!("edge-{i}"),
                    xds_addr: format!("10.0.0.{i}:15010"),
                })
                .collect(),
        )
    }

    #[test]
    fn every_proxy_has_one_owner_and_load_is_even() {
        let r = ring(4);
        let mut counts = [0usize; 4];
        for p in 0..10_000 {
            let owner = r
                .owner(&format!(
                    "sidecar~10.1.{}.{}~p.ns~ns.svc.cluster.local",
                    p / 256,
                    p % 256
                ))
                .unwrap();
            counts[owner
                .id
                .trim_start_matches("edge-")
                .parse::<usize>()
                .unwrap()] += 1;
        }
        for c in counts {
            assert!((2_000..3_000).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn scale_out_moves_about_one_nth() {
        let (before, after) = (ring(4), ring(5));
        let moved = (0..10_000)
            .map(|p| format!("proxy-{p}"))
            .filter(|p| before.owner(p).unwrap().id != after.owner(p).unwrap().id)
            .count();
        // 1/5 of 10k is 2k; every moved proxy goes to the new member.
        assert!((1_500..2_500).contains(&moved), "moved {moved}");
        assert!(
            (0..10_000)
                .map(|p| format!("proxy-{p}"))
                .filter(|p| before.owner(p).unwrap().id != after.owner(p).unwrap().id)
                .all(|p| after.owner(&p).unwrap().id == "edge-4")
        );
    }

    #[test]
    fn empty_ring_owns_everything_locally() {
        assert!(Ring::default().owns("me", "any"));
    }
}
