//! The protocol-independent part of a simulated proxy: which clusters and listeners it
//! holds (as shared [`DepIndex`]es), which endpoints and routes it has received, whether
//! it has its initial config, and whether it has seen the change.

use super::decode::Kind;
use super::index::DepIndex;
use super::verified::Verified;
use super::{Expect, Shared};
use std::sync::Arc;

/// A fixed-size bitset.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Bits {
    words: Box<[u64]>,
    len: usize,
    set: usize,
}

impl Bits {
    fn new(len: usize) -> Self {
        Bits {
            words: vec![0; len.div_ceil(64)].into_boxed_slice(),
            len,
            set: 0,
        }
    }

    fn get(&self, i: usize) -> bool {
        self.words[i / 64] & (1 << (i % 64)) != 0
    }

    fn insert(&mut self, i: usize) {
        if !self.get(i) {
            self.words[i / 64] |= 1 << (i % 64);
            self.set += 1;
        }
    }

    fn all(&self) -> bool {
        self.set == self.len
    }
}

/// What one accepted response changed.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    /// The previous index, when the names the next type subscribes to changed.
    pub children_changed: Option<Arc<DepIndex>>,
}

#[derive(Debug)]
pub(crate) struct Tracker {
    shared: Arc<Shared>,
    clusters: Arc<DepIndex>,
    listeners: Arc<DepIndex>,
    /// Over `clusters.children()`: EDS names received.
    eds_seen: Bits,
    /// Over `listeners.children()`: route configurations received.
    rds_seen: Bits,
    acked: [bool; 4],
    synced: bool,
    converged: bool,
    expects: bool,
}

impl Tracker {
    pub fn new(shared: Arc<Shared>) -> Self {
        let empty = shared.empty.clone();
        Tracker {
            shared,
            clusters: empty.clone(),
            listeners: empty,
            eds_seen: Bits::default(),
            rds_seen: Bits::default(),
            acked: [false; 4],
            synced: false,
            converged: false,
            expects: false,
        }
    }

    pub fn shared(&self) -> &Shared {
        &self.shared
    }

    /// The index whose children `kind` subscribes to (EDS: clusters, RDS: listeners).
    pub fn names_for(&self, kind: Kind) -> Option<&Arc<DepIndex>> {
        match kind {
            Kind::Endpoint => Some(&self.clusters),
            Kind::Route => Some(&self.listeners),
            _ => None,
        }
    }

    pub fn parents(&self, kind: Kind) -> &Arc<DepIndex> {
        match kind {
            Kind::Cluster | Kind::Endpoint => &self.clusters,
            Kind::Listener | Kind::Route => &self.listeners,
        }
    }

    pub fn expects_change(&self) -> bool {
        self.expects
    }

    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// Applies an accepted response of `kind`: `full` (state of the world) replaces the
    /// clusters or listeners, otherwise `verified` holds upserts and `removed` removals.
    /// What follows from the same response and the same state is computed once per run
    /// and shared (see [`Verified`]).
    pub fn apply(
        &mut self,
        kind: Kind,
        verified: &Verified,
        removed: &[String],
        full: bool,
    ) -> Applied {
        self.acked[kind.index()] = true;
        let interner = &self.shared.interner;
        match kind {
            Kind::Cluster | Kind::Listener => {
                let current = self.parents(kind);
                let next = if full {
                    let index = verified.index.get_or_init(|| {
                        let entries = verified
                            .summaries
                            .iter()
                            .map(|s| (s.name.clone(), s.children.clone()))
                            .collect();
                        interner.intern(DepIndex::new(entries))
                    });
                    Some(index.clone())
                } else if removed.is_empty() {
                    verified.upserts.get_or(current, || {
                        let next = current.with_changes(&verified.summaries, &[]);
                        next.map(|i| interner.intern(i))
                    })
                } else {
                    let next = current.with_changes(&verified.summaries, removed);
                    next.map(|i| interner.intern(i))
                };
                match next {
                    Some(next) => self.replace(kind, next),
                    None => Applied::default(),
                }
            }
            Kind::Endpoint | Kind::Route => {
                let (index, bits) = match kind {
                    Kind::Endpoint => (&self.clusters, &mut self.eds_seen),
                    _ => (&self.listeners, &mut self.rds_seen),
                };
                let positions = verified.positions.get_or(index, || {
                    let names = verified.summaries.iter().map(|s| s.name.as_str());
                    names
                        .filter_map(|n| index.child_position(n))
                        .map(|i| i as u32)
                        .collect()
                });
                for &i in positions.iter() {
                    bits.insert(i as usize);
                }
                // A Delta removal of a subscribed name answers it too: it does not exist.
                for name in removed {
                    if let Some(i) = index.child_position(name) {
                        bits.insert(i);
                    }
                }
                Applied::default()
            }
        }
    }

    fn replace(&mut self, kind: Kind, next: Arc<DepIndex>) -> Applied {
        let (slot, bits) = match kind {
            Kind::Cluster => (&mut self.clusters, &mut self.eds_seen),
            _ => (&mut self.listeners, &mut self.rds_seen),
        };
        if Arc::ptr_eq(slot, &next) {
            return Applied::default();
        }
        let old = std::mem::replace(slot, next);
        let changed = old.children() != slot.children();
        if changed {
            let mut remapped = Bits::new(slot.children().len());
            for (i, name) in slot.children().iter().enumerate() {
                if old.child_position(name).is_some_and(|j| bits.get(j)) {
                    remapped.insert(i);
                }
            }
            *bits = remapped;
        }
        if kind == Kind::Cluster {
            self.expects = match &self.shared.target.expect {
                Expect::Nobody => false,
                Expect::Cluster(c) => self.clusters.has_parent(c),
                Expect::EdsName(n) => self.clusters.child_position(n).is_some(),
            };
        }
        Applied {
            children_changed: changed.then_some(old),
        }
    }

    /// After an accepted response: `(synced now, converged now)`, each true once.
    pub fn settle(&mut self, marked: bool) -> (bool, bool) {
        let synced_now = !self.synced
            && self.acked[Kind::Cluster.index()]
            && self.acked[Kind::Listener.index()]
            && self.eds_seen.all()
            && self.rds_seen.all();
        self.synced |= synced_now;
        let converged_now = marked && !self.converged;
        self.converged |= converged_now;
        (synced_now, converged_now)
    }
}
