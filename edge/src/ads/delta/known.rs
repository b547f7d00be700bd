//! What a Delta proxy holds of one type, as compactly as SotW's [`SentSet`]: the resources
//! this stream sent (the generator's shared `Arc`s, 8 bytes each; their version is their
//! hash) and, after a reconnect, the versions the proxy claimed in
//! `initial_resource_versions` that no response has settled yet (the first response of
//! the type settles them all: matched, resent or removed).

use crate::ads::sent::SentSet;
use crate::xds::XdsResource;
use std::collections::HashMap;
use std::sync::Arc;

/// A resource's Delta version: its content hash, as 16 hex digits.
pub(crate) fn version_of(r: &XdsResource) -> String {
    format!("{:016x}", r.hash)
}

/// The hash a Delta version stands for; `None` for anything this edge would not have sent
/// (so it never equals a resource, and the resource is resent).
fn parse_version(v: &str) -> Option<u64> {
    if v.len() != 16 || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(v, 16).ok()
}

/// A version the proxy claims to hold, not yet matched against what the edge has.
#[derive(Debug)]
struct Claim {
    name: Box<str>,
    hash: Option<u64>,
}

/// Whether the proxy holds a resource's current version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holds {
    /// No (never sent, or another version).
    No,
    /// Yes: this stream sent it.
    Sent,
    /// Yes, by the proxy's own claim: [`Known::settle`] records it as sent.
    Claimed,
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
    /// What a reconnecting proxy says it holds.
    pub(crate) fn claimed(initial: &HashMap<String, String>) -> Known {
        let mut claims: Vec<Claim> = initial
            .iter()
            .map(|(name, version)| Claim {
                name: name.as_str().into(),
                hash: parse_version(version),
            })
            .collect();
        claims.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        Known {
            sent: SentSet::default(),
            claims,
        }
    }

    fn claim(&self, name: &str) -> Result<usize, usize> {
        self.claims.binary_search_by(|c| (*c.name).cmp(name))
    }

    pub(crate) fn len(&self) -> usize {
        self.sent.len() + self.claims.len()
    }

    pub(crate) fn holds(&self, r: &XdsResource) -> Holds {
        if self.sent.has(r) {
            Holds::Sent
        } else if self
            .claim(&r.name)
            .is_ok_and(|i| self.claims[i].hash == Some(r.hash))
        {
            Holds::Claimed
        } else {
            Holds::No
        }
    }

    /// Every name held, sent or claimed.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.sent
            .names()
            .chain(self.claims.iter().map(|c| &*c.name))
    }

    /// Records `resources` as held (sent now, or found current), replacing any claim.
    pub(crate) fn settle(&mut self, resources: &[&Arc<XdsResource>]) {
        if !self.claims.is_empty() {
            let mut settled = vec![false; self.claims.len()];
            for r in resources {
                if let Ok(i) = self.claim(&r.name) {
                    settled[i] = true;
                }
            }
            let mut i = 0;
            self.claims.retain(|_| {
                i += 1;
                !settled[i - 1]
            });
            self.free_settled_claims();
        }
        self.sent.insert_all(resources);
    }

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
    fn versions_parse_only_as_this_edge_writes_them() {
        let a = r("a", b"1");
        assert_eq!(parse_version(&version_of(&a)), Some(a.hash));
        for bad in [
            "",
            "old",
            "+123456789abcdef",
            "0123456789abcdef0",
            "0123456789abcdeg",
        ] {
            assert_eq!(parse_version(bad), None, "{bad}");
        }
    }

    #[test]
    fn claims_are_settled_by_what_is_current_sent_or_removed() {
        let (a, b, c) = (r("a", b"1"), r("b", b"1"), r("c", b"1"));
        let initial = HashMap::from([
            ("a".to_string(), version_of(&a)),
            ("b".to_string(), "0000000000000000".to_string()),
            ("c".to_string(), "not a version".to_string()),
            ("gone".to_string(), version_of(&a)),
        ]);
        let mut k = Known::claimed(&initial);
        assert_eq!(k.len(), 4);
        assert_eq!(k.holds(&a), Holds::Claimed);
        assert_eq!(k.holds(&b), Holds::No);
        assert_eq!(k.holds(&c), Holds::No);
        k.settle(&[&a]);
        k.settle(&[&b, &c]);
        k.remove("gone");
        assert!(k.claims.is_empty() && k.claims.capacity() == 0);
        assert_eq!(k.names().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(k.holds(&a), Holds::Sent);
        assert_eq!(k.holds(&r("a", b"2")), Holds::No);
        k.retain(|n| n != "b");
        assert_eq!(k.names().collect::<Vec<_>>(), ["a", "c"]);
    }
}
