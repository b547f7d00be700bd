//! Which types a push regenerates, and for which clusters.

use crate::push_queue::PushEvent;
use crate::xds::types::{ENDPOINT, PUSH_ORDER};
use std::collections::BTreeSet;

/// What a push must regenerate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PushScope {
    /// Every subscribed type, in [`PUSH_ORDER`].
    Full,
    /// EDS only; `Some(hosts)`: only the clusters of these service hostnames.
    Endpoints(Option<BTreeSet<String>>),
}

impl PushScope {
    pub fn of(event: &PushEvent) -> Self {
        let changes = &event.changes;
        if changes.full {
            return PushScope::Full;
        }
        if changes.is_everything() {
            return PushScope::Endpoints(None);
        }
        let mut hosts = BTreeSet::new();
        for key in &changes.keys {
            match key.hostname() {
                Some(host) => hosts.insert(host.to_string()),
                // A key that does not name a service: every cluster may be concerned.
                None => return PushScope::Endpoints(None),
            };
        }
        PushScope::Endpoints(Some(hosts))
    }

    /// The types to regenerate, in push order (make before break).
    pub fn types(&self) -> impl Iterator<Item = &'static str> + '_ {
        PUSH_ORDER
            .into_iter()
            .filter(move |t| matches!(self, PushScope::Full) || *t == ENDPOINT)
    }

    /// The host filter for `type_url` (`None`: everything subscribed).
    pub(crate) fn hosts(&self) -> Option<&BTreeSet<String>> {
        match self {
            PushScope::Endpoints(Some(h)) => Some(h),
            _ => None,
        }
    }
}

/// The service hostname of a cluster (or CLA) name: its last `|` field
/// (`outbound|80||reviews.default.svc.cluster.local`).
pub fn cluster_host(name: &str) -> &str {
    name.rsplit('|').next().unwrap_or(name)
}

/// Whether the cluster (or CLA) `name` is of one of `hosts` (`None`: every host). Called
/// for every name a stream watches on every endpoint push.
pub(crate) fn host_selected(hosts: Option<&BTreeSet<String>>, name: &str) -> bool {
    let Some(hosts) = hosts else { return true };
    // A push is about a few hosts: comparing each with the name's end costs less than
    // finding the name's last field and looking it up.
    if hosts.len() <= 4 {
        return hosts
            .iter()
            .any(|host| match name.strip_suffix(host.as_str()) {
                Some(rest) => rest.is_empty() || rest.ends_with('|'),
                None => false,
            });
    }
    hosts.contains(cluster_host(name))
}

/// Istio's short type names, for metric labels: `cds`, `eds`, `lds`, `rds`, `sds` or
/// `other`.
pub fn short_type(type_url: &str) -> &'static str {
    use crate::xds::types::*;
    match type_url {
        CLUSTER => "cds",
        ENDPOINT => "eds",
        LISTENER => "lds",
        ROUTE => "rds",
        SECRET => "sds",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_selected_by_its_last_field_however_many_hosts() {
        let names = [
            "outbound|80||a.ns.svc.cluster.local",
            "outbound|80|v1|a.ns.svc.cluster.local",
            "outbound|80||ba.ns.svc.cluster.local",
            "outbound|80||a.ns.svc.cluster.local.x",
            "a.ns.svc.cluster.local",
            "inbound|8080||",
        ];
        let few = BTreeSet::from(["a.ns.svc.cluster.local".to_string(), String::new()]);
        let many: BTreeSet<String> = few
            .iter()
            .cloned()
            .chain((0..8).map(|i| format!("other-{i}")))
            .collect();
        for name in names {
            let by_lookup = few.contains(cluster_host(name));
            assert_eq!(host_selected(Some(&few), name), by_lookup, "{name}");
            assert_eq!(host_selected(Some(&many), name), by_lookup, "{name}");
            assert!(host_selected(None, name));
        }
        assert!(!host_selected(Some(&few), names[2]));
        assert!(host_selected(Some(&few), names[1]));
    }
}
