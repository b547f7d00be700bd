//! What a namespace chunk change means for proxies: the hostnames whose routing or
//! definition changed, so only scopes that contain them are pushed (Istio's
//! `ConfigsUpdated` narrowed by `SidecarScope.DependsOnConfig`).

use shoal_proto::config::{ConfigKey, Kind};
use shoal_proto::model::{NamedConfig, NamespaceConfig};
use std::collections::{BTreeMap, BTreeSet};

/// The changes between two versions of one namespace's chunk, as `ServiceEntry
/// <ns>/<hostname>` keys (plus `Sidecar` keys for Sidecar changes). `None` when the
/// change cannot be narrowed (a wildcard host): every proxy must be considered.
pub fn namespace_changes(
    old: Option<&NamespaceConfig>,
    new: Option<&NamespaceConfig>,
) -> Option<BTreeSet<ConfigKey>> {
    let empty = NamespaceConfig::default();
    let (old, new) = (old.unwrap_or(&empty), new.unwrap_or(&empty));
    let namespace = if new.namespace.is_empty() {
        &old.namespace
    } else {
        &new.namespace
    };
    let mut hosts = BTreeSet::new();

    let old_services: BTreeMap<&str, _> = old
        .services
        .iter()
        .map(|s| (s.hostname.as_str(), s))
        .collect();
    let new_services: BTreeMap<&str, _> = new
        .services
        .iter()
        .map(|s| (s.hostname.as_str(), s))
        .collect();
    for (host, svc) in &old_services {
        if new_services.get(host) != Some(svc) {
            hosts.insert(host.to_string());
        }
    }
    for host in new_services.keys() {
        if !old_services.contains_key(host) {
            hosts.insert(host.to_string());
        }
    }

    let vs_hosts =
        |vs: &NamedConfig<shoal_proto::config::istio::VirtualService>| vs.spec.hosts.clone();
    if !changed_hosts(
        &old.virtual_services,
        &new.virtual_services,
        vs_hosts,
        &mut hosts,
    ) {
        return None;
    }
    let dr_host =
        |dr: &NamedConfig<shoal_proto::config::istio::DestinationRule>| vec![dr.spec.host.clone()];
    if !changed_hosts(
        &old.destination_rules,
        &new.destination_rules,
        dr_host,
        &mut hosts,
    ) {
        return None;
    }

    let mut keys: BTreeSet<ConfigKey> = hosts
        .into_iter()
        .map(|h| ConfigKey::new(Kind::ServiceEntry, namespace, h))
        .collect();
    // A Sidecar change reshapes its namespace's scopes (or, in the root namespace, all).
    for name in changed_names(&old.sidecars, &new.sidecars) {
        keys.insert(ConfigKey::new(Kind::Sidecar, namespace, name));
    }
    // Gateways concern routers only, which are always pushed on a full update.
    for name in changed_names(&old.gateways, &new.gateways) {
        keys.insert(ConfigKey::new(Kind::Gateway, namespace, name));
    }
    Some(keys)
}

/// Adds the hosts of every object that was added, removed or changed; `false` when one
/// of them is a wildcard (it cannot be narrowed to scopes by hostname).
fn changed_hosts<T: PartialEq>(
    old: &[NamedConfig<T>],
    new: &[NamedConfig<T>],
    hosts_of: impl Fn(&NamedConfig<T>) -> Vec<String>,
    out: &mut BTreeSet<String>,
) -> bool {
    let old_by: BTreeMap<&str, &NamedConfig<T>> =
        old.iter().map(|c| (c.name.as_str(), c)).collect();
    let new_by: BTreeMap<&str, &NamedConfig<T>> =
        new.iter().map(|c| (c.name.as_str(), c)).collect();
    let changed = old_by
        .iter()
        .filter(|(n, c)| new_by.get(*n).is_none_or(|d| d.spec != c.spec))
        .map(|(_, c)| *c)
        .chain(
            new_by
                .iter()
                .filter(|(n, c)| old_by.get(*n).is_none_or(|d| d.spec != c.spec))
                .map(|(_, c)| *c),
        );
    for config in changed {
        for host in hosts_of(config) {
            if host.contains('*') {
                return false;
            }
            out.insert(host);
        }
    }
    true
}

fn changed_names<'a, T: PartialEq>(
    old: &'a [NamedConfig<T>],
    new: &'a [NamedConfig<T>],
) -> BTreeSet<&'a str> {
    let old_by: BTreeMap<&str, &T> = old.iter().map(|c| (c.name.as_str(), &c.spec)).collect();
    let new_by: BTreeMap<&str, &T> = new.iter().map(|c| (c.name.as_str(), &c.spec)).collect();
    old_by
        .iter()
        .filter(|(n, s)| new_by.get(*n) != Some(*s))
        .map(|(n, _)| *n)
        .chain(new_by.keys().filter(|n| !old_by.contains_key(*n)).copied())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::config::istio::{
        Destination, HttpRoute, HttpRouteDestination, VirtualService,
    };

    fn vs(name: &str, host: &str, timeout: &str) -> NamedConfig<VirtualService> {
        NamedConfig {
            name: name.into(),
            namespace: "ns".into(),
            spec: VirtualService {
                hosts: vec![host.into()],
                http: vec![HttpRoute {
                    route: vec![HttpRouteDestination {
                        destination: Destination {
                            host: host.into(),
                            ..Default::default()
                        },
                        weight: 0,
                    }],
                    timeout: Some(timeout.into()),
                    ..Default::default()
                }],
                ..Default::default()
            },
        }
    }

    fn ns(vss: Vec<NamedConfig<VirtualService>>) -> NamespaceConfig {
        NamespaceConfig {
            namespace: "ns".into(),
            virtual_services: vss,
            ..Default::default()
        }
    }

    fn names(keys: &BTreeSet<ConfigKey>) -> Vec<&str> {
        keys.iter().map(|k| k.name.as_str()).collect()
    }

    #[test]
    fn a_changed_virtual_service_names_its_hosts_only() {
        let old = ns(vec![
            vs("a", "a.ns.svc.cluster.local", "1s"),
            vs("b", "b.ns.svc.cluster.local", "1s"),
        ]);
        let new = ns(vec![
            vs("a", "a.ns.svc.cluster.local", "2s"),
            vs("b", "b.ns.svc.cluster.local", "1s"),
        ]);
        let keys = namespace_changes(Some(&old), Some(&new)).unwrap();
        assert_eq!(names(&keys), ["a.ns.svc.cluster.local"]);
        assert!(keys.iter().all(|k| k.kind == Kind::ServiceEntry));
    }

    #[test]
    fn added_and_removed_objects_count() {
        let old = ns(vec![vs("a", "a.x", "1s")]);
        let new = ns(vec![vs("b", "b.x", "1s")]);
        assert_eq!(
            names(&namespace_changes(Some(&old), Some(&new)).unwrap()),
            ["a.x", "b.x"]
        );
        assert_eq!(
            names(&namespace_changes(None, Some(&new)).unwrap()),
            ["b.x"]
        );
        assert_eq!(
            names(&namespace_changes(Some(&old), None).unwrap()),
            ["a.x"]
        );
    }

    #[test]
    fn wildcard_hosts_cannot_be_narrowed() {
        let old = ns(vec![]);
        let new = ns(vec![vs("w", "*.example.com", "1s")]);
        assert!(namespace_changes(Some(&old), Some(&new)).is_none());
    }
}
