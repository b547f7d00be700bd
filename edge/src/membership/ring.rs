use shoal_proto::transport::Member;

/// The live edges, and who owns which proxy (rendezvous / highest-random-weight hashing:
/// no virtual nodes to tune, and only the proxies of a joining or leaving member move).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ring {
    members: Vec<Member>,
    /// Per member, the score's hash state after its ID (a function of `members`).
    seeds: Vec<u64>,
}

/// Members whose scores are computed together, one hash chain each: the chains are
/// independent, so the CPU advances them side by side rather than one byte at a time.
const LANES: usize = 8;

impl Ring {
    pub fn new(mut members: Vec<Member>) -> Self {
        members.sort_by(|a, b| a.id.cmp(&b.id));
        members.dedup_by(|a, b| a.id == b.id);
        let seeds = members.iter().map(|m| seed(&m.id)).collect();
        Ring { members, seeds }
    }

    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The member that owns `proxy_id`; `None` on an empty ring. Every proxy an edge
    /// holds is looked up on each ring change, so the members' scores are computed
    /// [`LANES`] at a time, each from its member's seed.
    pub fn owner(&self, proxy_id: &str) -> Option<&Member> {
        let mut best: Option<(u64, usize)> = None;
        for (lane, seeds) in self.seeds.chunks(LANES).enumerate() {
            let mut h = [0u64; LANES];
            h[..seeds.len()].copy_from_slice(seeds);
            for &b in proxy_id.as_bytes() {
                for h in &mut h {
                    *h = fnv_step(*h, b);
                }
            }
            for (i, h) in h[..seeds.len()].iter().enumerate() {
                let score = finish(*h);
                // Members are sorted by ID: on equal scores the later (greater) ID wins.
                if best.is_none_or(|(top, _)| score >= top) {
                    best = Some((score, lane * LANES + i));
                }
            }
        }
        best.map(|(_, i)| &self.members[i])
    }

    pub fn owns(&self, member_id: &str, proxy_id: &str) -> bool {
        self.owner(proxy_id).is_none_or(|m| m.id == member_id)
    }
}

/// A member's score for a proxy is a stable 64-bit hash of both IDs: FNV-1a over the
/// member's ID, a 0xff byte and the proxy's ID, then a SplitMix64 finalizer for
/// avalanche. Stable across processes and builds (edges of two versions agree on every
/// owner), unlike `DefaultHasher`. The seed is the FNV state after the member's part.
fn seed(member: &str) -> u64 {
    member
        .bytes()
        .chain([0xff])
        .fold(0xcbf2_9ce4_8422_2325, fnv_step)
}

fn fnv_step(h: u64, b: u8) -> u64 {
    (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
}

fn finish(h: u64) -> u64 {
    let h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
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

    /// The score as first defined, byte by byte over both IDs: owners must never change
    /// with the way they are computed (edges of two versions share one ring).
    fn owner_by_definition<'a>(ring: &'a Ring, proxy: &str) -> Option<&'a Member> {
        let score = |member: &str| {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in member.bytes().chain([0xff]).chain(proxy.bytes()) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
            h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            h ^ (h >> 31)
        };
        ring.members.iter().max_by_key(|m| (score(&m.id), &m.id))
    }

    #[test]
    fn owners_are_those_of_the_score_as_defined() {
        // Fewer, as many and more members than are hashed together.
        for n in [1, 3, LANES, LANES + 1, 2 * LANES + 5] {
            let r = ring(n);
            for p in 0..2_000 {
                let proxy = format!(
                    "sidecar~10.2.{}.{}~p-{p}.ns~ns.svc.cluster.local",
                    p / 256,
                    p % 256
                );
                assert_eq!(
                    r.owner(&proxy),
                    owner_by_definition(&r, &proxy),
                    "{n} members, {proxy}"
                );
            }
            assert_eq!(r.owner(""), owner_by_definition(&r, ""));
        }
        // Two members of one score: the greater ID wins, as by definition.
        let twins = Ring {
            seeds: vec![7, 7],
            ..ring(2)
        };
        assert_eq!(twins.owner("p").unwrap().id, "edge-1");
    }

    #[test]
    fn empty_ring_owns_everything_locally() {
        assert!(Ring::default().owns("me", "any"));
    }
}
