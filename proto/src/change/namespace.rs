//! What a namespace chunk change means for proxies: the services whose definition
//! changed and the hostnames whose routing changed, so only scopes that contain them are
//! pushed (Istio's `ConfigsUpdated` narrowed by `SidecarScope.DependsOnConfig`).

use super::ChangeKey;
use crate::config::istio::{DestinationRule, VirtualService};
use crate::config::{ConfigKey, Kind};
use crate::model::{NamedConfig, NamespaceConfig, Service};
use std::collections::{BTreeMap, BTreeSet};

/// Every change between two versions of one namespace's chunk. `None` when the change
/// cannot be narrowed (a wildcard host): every proxy must be considered.
pub fn namespace_changes(
    old: Option<&NamespaceConfig>,
    new: Option<&NamespaceConfig>,
) -> Option<BTreeSet<ChangeKey>> {
    let empty = NamespaceConfig::default();
    let (old, new) = (old.unwrap_or(&empty), new.unwrap_or(&empty));
    // A network gateway moves the endpoints every proxy on another network sees.
    if old.network_gateways != new.network_gateways {
        return None;
    }
    let mut keys = routing_changes(old, new)?;
    keys.extend(service_changes(&old.services, &new.services));
    Some(keys)
}

/// The services added, removed or redefined, by key.
pub fn service_changes(old: &[Service], new: &[Service]) -> BTreeSet<ChangeKey> {
    let old_by: BTreeMap<&str, &Service> = old.iter().map(|s| (s.hostname.as_str(), s)).collect();
    let new_by: BTreeMap<&str, &Service> = new.iter().map(|s| (s.hostname.as_str(), s)).collect();
    let changed = old_by
        .iter()
        .filter(|(h, s)| new_by.get(*h) != Some(*s))
        .chain(new_by.iter().filter(|(h, _)| !old_by.contains_key(*h)));
    changed.map(|(_, s)| ChangeKey::Service(s.key())).collect()
}

/// The routing changes (VirtualServices and DestinationRules by the hostnames they
/// name, Sidecars, Gateways and credentials by key); services are left out. `None` when a wildcard
/// host keeps the change from being narrowed, or the mesh config or a security policy
/// changed.
pub fn routing_changes(
    old: &NamespaceConfig,
    new: &NamespaceConfig,
) -> Option<BTreeSet<ChangeKey>> {
    // The mesh config shapes every proxy's config: Istio pushes a change to all, in full.
    // So do security policies: a namespace's PeerAuthentication decides how every client
    // of its services connects, the root namespace's policies apply mesh-wide.
    if old.mesh_configs != new.mesh_configs
        || old.peer_authentications != new.peer_authentications
        || old.authorization_policies != new.authorization_policies
        || old.request_authentications != new.request_authentications
    {
        return None;
    }
    let namespace = if new.namespace.is_empty() {
        &old.namespace
    } else {
        &new.namespace
    };
    let mut hosts = BTreeSet::new();
    let vs_hosts = |vs: &NamedConfig<VirtualService>| vs.spec.hosts.clone();
    if !changed_hosts(
        &old.virtual_services,
        &new.virtual_services,
        vs_hosts,
        &mut hosts,
    ) {
        return None;
    }
    let dr_host = |dr: &NamedConfig<DestinationRule>| vec![dr.spec.host.clone()];
    if !changed_hosts(
        &old.destination_rules,
        &new.destination_rules,
        dr_host,
        &mut hosts,
    ) {
        return None;
    }
    let mut keys: BTreeSet<ChangeKey> = hosts.into_iter().map(ChangeKey::Host).collect();
    // A Sidecar change reshapes its namespace's scopes (or, in the root namespace, all).
    for name in changed_names(&old.sidecars, &new.sidecars) {
        keys.insert(ChangeKey::Config(ConfigKey::new(
            Kind::Sidecar,
            namespace,
            name,
        )));
    }
    // Gateways concern routers only, which are always pushed on a full update.
    for name in changed_names(&old.gateways, &new.gateways) {
        keys.insert(ChangeKey::Config(ConfigKey::new(
            Kind::Gateway,
            namespace,
            name,
        )));
    }
    // So do their credentials.
    for name in changed_names(&old.credentials, &new.credentials) {
        keys.insert(ChangeKey::Config(ConfigKey::new(
            Kind::Secret,
            namespace,
            name,
        )));
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
    use crate::config::istio::{Destination, HttpRoute, HttpRouteDestination};

    fn vs(name: &str, host: &str, timeout: &str) -> NamedConfig<VirtualService> {
        NamedConfig {
            name: name.into(),
            namespace: "ns".into(),
            created: 0,
            spec: VirtualService {
                hosts: vec![host.into()],
                http: vec![HttpRoute {
                    route: vec![HttpRouteDestination {
                        destination: Destination {
                            host: host.into(),
                            ..Default::default()
                        },
                        weight: 0,
                        headers: None,
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

    fn hosts(keys: &BTreeSet<ChangeKey>) -> Vec<&str> {
        keys.iter().filter_map(ChangeKey::hostname).collect()
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
        assert_eq!(hosts(&keys), ["a.ns.svc.cluster.local"]);
        assert!(keys.iter().all(|k| matches!(k, ChangeKey::Host(_))));
    }

    #[test]
    fn added_and_removed_objects_count() {
        let old = ns(vec![vs("a", "a.x", "1s")]);
        let new = ns(vec![vs("b", "b.x", "1s")]);
        assert_eq!(
            hosts(&namespace_changes(Some(&old), Some(&new)).unwrap()),
            ["a.x", "b.x"]
        );
        assert_eq!(
            hosts(&namespace_changes(None, Some(&new)).unwrap()),
            ["b.x"]
        );
        assert_eq!(
            hosts(&namespace_changes(Some(&old), None).unwrap()),
            ["a.x"]
        );
    }

    #[test]
    fn wildcard_hosts_cannot_be_narrowed() {
        let old = ns(vec![]);
        let new = ns(vec![vs("w", "*.example.com", "1s")]);
        assert!(namespace_changes(Some(&old), Some(&new)).is_none());
    }

    #[test]
    fn services_are_named_by_key() {
        let svc = |host: &str, port: u32| Service {
            hostname: host.into(),
            namespace: "ns".into(),
            name: host.into(),
            ports: vec![crate::model::ServicePort {
                name: "http".into(),
                port,
                protocol: crate::model::Protocol::Http,
            }],
            addresses: Vec::new(),
            resolution: crate::model::Resolution::ClientSideLb,
            mesh_external: false,
            export_to: Default::default(),
            labels: Default::default(),
            clusters: Vec::new(),
            external_name: String::new(),
        };
        let keys = service_changes(
            &[svc("a.ns", 80), svc("b.ns", 80)],
            &[svc("a.ns", 81), svc("b.ns", 80), svc("c.ns", 80)],
        );
        assert_eq!(
            keys,
            BTreeSet::from([
                ChangeKey::service("ns", "a.ns"),
                ChangeKey::service("ns", "c.ns")
            ])
        );
    }
}
