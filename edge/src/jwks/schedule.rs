//! When each `jwksUri` is fetched: a state machine without I/O (the refresher does the
//! fetching and the waiting).

use super::JwksFetchConfig;
use shoal_proto::config::{ConfigKey, Kind};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::time::Instant;

/// The URIs a snapshot names: each with its RequestAuthentications and the shortest
/// `timeout` of its rules.
#[derive(Debug, Default)]
pub struct Wanted {
    uris: BTreeMap<String, (BTreeSet<ConfigKey>, Option<Duration>)>,
}

impl Wanted {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, uri: &str, namespace: &str, name: &str, timeout: Option<Duration>) {
        let entry = self.uris.entry(uri.to_string()).or_default();
        entry
            .0
            .insert(ConfigKey::new(Kind::RequestAuthentication, namespace, name));
        entry.1 = match (entry.1, timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// How a fetch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Fetched,
    Failed,
}

#[derive(Debug)]
struct Entry {
    policies: BTreeSet<ConfigKey>,
    timeout: Duration,
    next_due: Instant,
}

/// Every wanted URI and when it is next fetched.
#[derive(Debug)]
pub struct Schedule {
    config: JwksFetchConfig,
    entries: BTreeMap<String, Entry>,
}

impl Schedule {
    pub fn new(config: JwksFetchConfig) -> Self {
        Schedule {
            config,
            entries: BTreeMap::new(),
        }
    }

    /// Takes the URIs a new snapshot names: new ones are due now, known ones keep their
    /// time, gone ones are dropped. Returns those over `max_uris` (in URI order), with
    /// their RequestAuthentications, which are not fetched.
    pub fn want(&mut self, wanted: Wanted, now: Instant) -> Vec<(String, Vec<String>)> {
        let mut over = Vec::new();
        let mut entries = BTreeMap::new();
        for (uri, (policies, timeout)) in wanted.uris {
            if entries.len() >= self.config.max_uris {
                let names = policies
                    .iter()
                    .map(|k| format!("{}/{}", k.namespace, k.name))
                    .collect();
                over.push((uri, names));
                continue;
            }
            let next_due = self.entries.get(&uri).map_or(now, |e| e.next_due);
            let timeout = timeout.unwrap_or(self.config.timeout);
            entries.insert(
                uri,
                Entry {
                    policies,
                    timeout,
                    next_due,
                },
            );
        }
        self.entries = entries;
        over
    }

    /// The URIs fetched (what the store keeps).
    pub fn uris(&self) -> BTreeSet<String> {
        self.entries.keys().cloned().collect()
    }

    /// The URIs due at `now`, with their timeouts; each is then not due again until
    /// [`Self::done`] says how it went.
    pub fn due(&mut self, now: Instant) -> Vec<(String, Duration)> {
        let far = now + Duration::from_secs(365 * 24 * 3600);
        self.entries
            .iter_mut()
            .filter(|(_, e)| e.next_due <= now)
            .map(|(uri, e)| {
                e.next_due = far;
                (uri.clone(), e.timeout)
            })
            .collect()
    }

    /// Records a fetch of `uri` that ended at `now`: next after the refresh interval,
    /// or after the retry interval when it failed.
    pub fn done(&mut self, uri: &str, outcome: Outcome, now: Instant) {
        if let Some(e) = self.entries.get_mut(uri) {
            e.next_due = now
                + match outcome {
                    Outcome::Fetched => self.config.refresh_interval,
                    Outcome::Failed => self.config.retry_interval,
                };
        }
    }

    /// The RequestAuthentications naming `uri`.
    pub fn policies(&self, uri: &str) -> Vec<ConfigKey> {
        self.entries
            .get(uri)
            .map(|e| e.policies.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// When the next URI is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.entries.values().map(|e| e.next_due).min()
    }
}
