//! What a Delta proxy holds of one type, as compactly as SotW's [`SentSet`]: the resources
//! this stream sent or found current (the generator's shared `Arc`s, 8 bytes each; their
//! version is their hash) and the versions a reconnecting proxy claimed in
//! `initial_resource_versions` that no response has settled yet. The first response of
//! the type settles its request's claims as it goes (looked up in the request itself):
//! matched, resent or removed; they are kept, compactly, only where it could not.

use crate::ads::sent::SentSet;
use crate::xds::XdsResource;
use std::collections::HashMap;
use std::sync::Arc;

/// A resource's Delta version: its content hash as 16 hex digits, `@`, and the snapshot
/// it was sent from. Only the hash is compared, so a proxy that moves between edges (or
/// across builds) is not sent what it holds; the snapshot tells the edge a reconnecting
/// proxy reaches that the proxy has seen that snapshot ([`claimed_snapshot`]).
pub(crate) fn version_of(r: &XdsResource, snapshot: u64) -> String {
    format!("{:016x}@{snapshot}", r.hash)
}

/// The hash a Delta version stands for; `None` for anything this edge would not have sent
/// (so it never equals a resource, and the resource is resent). A bare hash (what edges
/// sent before versions named their snapshot) is accepted.
fn parse_version(v: &str) -> Option<u64> {
    let hash = v.split_once('@').map_or(v, |(hash, _)| hash);
    if hash.len() != 16 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hash, 16).ok()
}

/// The newest snapshot a reconnecting proxy's `initial_resource_versions` were sent from:
/// it has seen that snapshot, so an edge behind it must not answer from an older one.
/// (A response that only removed resources leaves no version behind: the bound is the
/// last one that sent a resource.)
pub(crate) fn claimed_snapshot(initial: &HashMap<String, String>) -> Option<u64> {
    initial
        .values()
        .filter_map(|v| v.split_once('@')?.1.parse().ok())
        .max()
}

/// A version the proxy claims to hold, not yet matched against what the edge has.
#[derive(Debug)]
struct Claim {
    name: Box<str>,
    hash: Option<u64>,
}

/// Names (and versions) a Delta proxy holds of one type. A name is in at most one of
/// `sent` and `claims`.
#[derive(Debug, Default)]
pub(crate) struct Known {
    sent: SentSet,
    /// Sorted by name; empty (no allocation) but right after a reconnect.
    claims: Vec<Claim>,
}

impl Known {
    /// Keeps what a reconnecting proxy claims, for the responses to come (the first one
    /// could not be generated).
    pub(crate) fn keep_claims(&mut self, initial: &HashMap<String, String>) {
        self.claims
            .extend(initial.iter().map(|(name, version)| Claim {
                name: name.as_str().into(),
                hash: parse_version(version),
            }));
        self.claims.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        self.claims.dedup_by(|a, b| a.name == b.name);
    }

    fn claim(&self, name: &str) -> Result<usize, usize> {
        self.claims.binary_search_by(|c| (*c.name).cmp(name))
    }

    pub(crate) fn len(&self) -> usize {
        self.sent.len() + self.claims.len()
    }

    /// The resources this stream sent or found current (claims not settled left out).
    pub(crate) fn sent(&self) -> &SentSet {
        &self.sent
    }

    /// Every name held, sent or claimed.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.sent
            .names()
            .chain(self.claims.iter().map(|c| &*c.name))
    }

    /// Records every one of `resources` (names unique) as held, and returns those the
    /// proxy did not hold at that version: the ones to send. A claim, kept or in
    /// `claimed` (a reconnect's first request), is settled by the resource of its name;
    /// the claims in `claimed` that no resource settles are kept.
    pub(crate) fn update<'a>(
        &mut self,
        resources: &'a [Arc<XdsResource>],
        claimed: Option<&HashMap<String, String>>,
    ) -> Vec<&'a Arc<XdsResource>> {
        let claimed = claimed.filter(|c| !c.is_empty());
        if claimed.is_none() && self.claims.is_empty() {
            let changed: Vec<&Arc<XdsResource>> =
                resources.iter().filter(|r| !self.sent.has(r)).collect();
            self.sent.insert_all(&changed);
            return changed;
        }
        let mut settled = vec![false; self.claims.len()];
        let mut matched = 0;
        let (mut changed, mut current) = (Vec::new(), Vec::new());
        for r in resources.iter().filter(|r| !self.sent.has(r)) {
            let hash = if let Some(version) = claimed.and_then(|c| c.get(&r.name)) {
                matched += 1;
                parse_version(version)
            } else if let Ok(i) = self.claim(&r.name) {
                settled[i] = true;
                self.claims[i].hash
            } else {
                None
            };
            if hash == Some(r.hash) {
                current.push(r);
            } else {
                changed.push(r);
            }
        }
        let mut i = 0;
        self.claims.retain(|_| {
            i += 1;
            !settled[i - 1]
        });
        current.extend_from_slice(&changed);
        self.sent.insert_all(&current);
        if let Some(claimed) = claimed.filter(|c| c.len() > matched) {
            let left: HashMap<String, String> = claimed
                .iter()
                .filter(|(name, _)| !self.sent.contains(name))
                .map(|(n, v)| (n.clone(), v.clone()))
                .collect();
            self.keep_claims(&left);
        }
        self.free_settled_claims();
        changed
    }

    #[cfg(test)]
    pub(crate) fn remove(&mut self, name: &str) {
        self.sent.remove(name);
        if let Ok(i) = self.claim(name) {
            self.claims.remove(i);
            self.free_settled_claims();
        }
    }

    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.sent.retain(&mut keep);
        self.claims.retain(|c| keep(&c.name));
        self.free_settled_claims();
    }

    /// Once every claim is settled, their list goes (it served one reconnect).
    fn free_settled_claims(&mut self) {
        if self.claims.is_empty() {
            self.claims = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &str, content: &[u8]) -> Arc<XdsResource> {
        Arc::new(XdsResource::new(name.into(), "t", content.to_vec()))
    }

    #[test]
    fn versions_are_the_same_on_every_edge_and_build() {
        // BLAKE3("hello") begins ea8f163db3868292: its first eight bytes, little-endian.
        assert_eq!(version_of(&r("a", b"hello"), 7), "928286b33d168fea@7");
    }

    #[test]
    fn versions_parse_only_as_this_edge_writes_them() {
        let a = r("a", b"1");
        assert_eq!(parse_version(&version_of(&a, 3)), Some(a.hash));
        // An edge of the previous release wrote the hash alone.
        assert_eq!(parse_version(&format!("{:016x}", a.hash)), Some(a.hash));
        for bad in [
            "",
            "old",
            "@3",
            "+123456789abcdef",
            "0123456789abcdef0",
            "0123456789abcdeg",
            "0123456789abcdeg@3",
        ] {
            assert_eq!(parse_version(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_claimed_snapshot_is_the_newest_a_version_names() {
        let (a, b) = (r("a", b"1"), r("b", b"1"));
        let claims = |vs: &[(&str, String)]| -> HashMap<String, String> {
            vs.iter().map(|(n, v)| (n.to_string(), v.clone())).collect()
        };
        let held = claims(&[("a", version_of(&a, 12)), ("b", version_of(&b, 9))]);
        assert_eq!(claimed_snapshot(&held), Some(12));
        // Versions without a snapshot (another server's, an older edge's) bound nothing.
        let old = claims(&[("a", format!("{:016x}", a.hash)), ("b", "v7".into())]);
        assert_eq!(claimed_snapshot(&old), None);
        assert_eq!(claimed_snapshot(&HashMap::new()), None);
    }

    #[test]
    fn claims_are_settled_by_what_is_current_sent_or_removed() {
        let (a, b, c) = (r("a", b"1"), r("b", b"1"), r("c", b"1"));
        let claimed = HashMap::from([
            ("a".to_string(), version_of(&a, 1)),
            ("b".to_string(), "0000000000000000".to_string()),
            ("c".to_string(), "not a version".to_string()),
            ("gone".to_string(), version_of(&a, 1)),
        ]);
        let resources = [a.clone(), b.clone(), c.clone()];
        for kept in [false, true] {
            let mut k = Known::default();
            let changed = if kept {
                k.keep_claims(&claimed);
                assert_eq!(k.len(), 4);
                k.update(&resources, None)
            } else {
                k.update(&resources, Some(&claimed))
            };
            assert_eq!(
                changed.iter().map(|r| &*r.name).collect::<Vec<_>>(),
                ["b", "c"]
            );
            // Unsettled: kept until removed.
            assert_eq!(k.names().collect::<Vec<_>>(), ["a", "b", "c", "gone"]);
            k.remove("gone");
            assert!(k.claims.is_empty() && k.claims.capacity() == 0);
        }
        let mut k = Known::default();
        assert_eq!(k.update(&resources, Some(&claimed)).len(), 2);
        k.remove("gone");
        // Now all held: only a new version is to be sent again.
        assert!(k.update(&resources, None).is_empty());
        let a2 = r("a", b"2");
        assert_eq!(k.update(std::slice::from_ref(&a2), None).len(), 1);
        k.retain(|n| n != "b");
        assert_eq!(k.names().collect::<Vec<_>>(), ["a", "c"]);
        assert_eq!(k.len(), 2);
    }
}
