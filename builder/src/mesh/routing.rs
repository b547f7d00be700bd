//! A namespace's routing objects with short names resolved, as Istio resolves them when
//! it indexes config: `reviews` in `shop` becomes `reviews.shop.svc.cluster.local`.

use super::NamespaceObjects;
use shoal_proto::config::{Config, Kind, Spec};
use shoal_proto::model::{NamedConfig, NamespaceConfig, host_matches, resolve_short_name};
use std::collections::{BTreeMap, HashSet};

/// The same object ingested from several clusters is one object: the first cluster wins.
fn dedup<'a>(configs: &[&'a Config]) -> Vec<&'a Config> {
    let mut by_name: BTreeMap<&str, &'a Config> = BTreeMap::new();
    for c in configs {
        by_name
            .entry(c.meta.name.as_str())
            .and_modify(|cur| {
                if c.meta.origin.cluster < cur.meta.origin.cluster {
                    *cur = c;
                }
            })
            .or_insert(c);
    }
    by_name.into_values().collect()
}

fn named<T>(c: &Config, spec: T) -> NamedConfig<T> {
    NamedConfig {
        name: c.meta.name.clone(),
        namespace: c.meta.namespace.clone(),
        created: c.meta.created_seconds(),
        spec,
    }
}

pub fn build(namespace: &str, objects: &NamespaceObjects<'_>) -> NamespaceConfig {
    let resolve = |h: &str| resolve_short_name(h, namespace);
    let mut config = NamespaceConfig {
        namespace: namespace.to_string(),
        ..Default::default()
    };
    for c in dedup(objects.of(Kind::VirtualService)) {
        let Spec::VirtualService(vs) = &c.spec else {
            continue;
        };
        let mut vs = vs.clone();
        vs.hosts = vs.hosts.iter().map(|h| resolve(h)).collect();
        for route in &mut vs.http {
            for d in &mut route.route {
                d.destination.host = resolve(&d.destination.host);
            }
            for m in route
                .mirror
                .iter_mut()
                .chain(route.mirrors.iter_mut().map(|m| &mut m.destination))
            {
                m.host = resolve(&m.host);
            }
        }
        for d in vs
            .tcp
            .iter_mut()
            .flat_map(|r| r.route.iter_mut())
            .chain(vs.tls.iter_mut().flat_map(|r| r.route.iter_mut()))
        {
            d.destination.host = resolve(&d.destination.host);
        }
        config.virtual_services.push(named(c, vs));
    }
    for c in dedup(objects.of(Kind::DestinationRule)) {
        let Spec::DestinationRule(dr) = &c.spec else {
            continue;
        };
        let mut dr = dr.clone();
        dr.host = resolve(&dr.host);
        config.destination_rules.push(named(c, dr));
    }
    for c in dedup(objects.of(Kind::Sidecar)) {
        let Spec::Sidecar(sc) = &c.spec else { continue };
        config.sidecars.push(named(c, sc.clone()));
    }
    for c in dedup(objects.of(Kind::Gateway)) {
        let Spec::Gateway(gw) = &c.spec else { continue };
        config.gateways.push(named(c, gw.clone()));
    }
    for c in dedup(objects.of(Kind::Secret)) {
        let Spec::Secret(secret) = &c.spec else {
            continue;
        };
        config.credentials.push(named(c, secret.clone()));
    }
    for c in dedup(objects.of(Kind::PeerAuthentication)) {
        if let Spec::PeerAuthentication(pa) = &c.spec {
            config.peer_authentications.push(named(c, pa.clone()));
        }
    }
    for c in dedup(objects.of(Kind::AuthorizationPolicy)) {
        if let Spec::AuthorizationPolicy(ap) = &c.spec {
            config.authorization_policies.push(named(c, ap.clone()));
        }
    }
    for c in dedup(objects.of(Kind::RequestAuthentication)) {
        if let Spec::RequestAuthentication(ra) = &c.spec {
            config.request_authentications.push(named(c, ra.clone()));
        }
    }
    for c in dedup(objects.of(Kind::MeshConfig)) {
        let Spec::MeshConfig(mesh) = &c.spec else {
            continue;
        };
        config.mesh_configs.push(named(c, mesh.clone()));
    }
    config
}

/// VirtualService destinations naming a subset that no DestinationRule for that host
/// defines: Istio accepts these (Envoy answers 503), and operators want to hear of them.
pub fn dangling_subsets<'a>(
    namespaces: impl Iterator<Item = &'a NamespaceConfig> + Clone,
) -> Vec<String> {
    let defined: HashSet<(&str, &str)> = namespaces
        .clone()
        .flat_map(|ns| ns.destination_rules.iter())
        .flat_map(|dr| {
            dr.spec
                .subsets
                .iter()
                .map(move |s| (dr.spec.host.as_str(), s.name.as_str()))
        })
        .collect();
    // Exact hosts are looked up; only wildcard hosts need `host_matches` against each
    // destination (a scan of every subset per destination was quadratic in the mesh).
    let wildcards: Vec<(&str, &str)> = defined
        .iter()
        .filter(|(host, _)| host.starts_with('*'))
        .copied()
        .collect();
    let mut out = Vec::new();
    for ns in namespaces {
        for vs in &ns.virtual_services {
            let destinations = vs
                .spec
                .http
                .iter()
                .flat_map(|r| r.route.iter().map(|d| &d.destination))
                .chain(
                    vs.spec
                        .tcp
                        .iter()
                        .flat_map(|r| r.route.iter().map(|d| &d.destination)),
                );
            for d in destinations {
                if d.subset.is_empty() {
                    continue;
                }
                let found = defined.contains(&(d.host.as_str(), d.subset.as_str()))
                    || wildcards
                        .iter()
                        .any(|(host, subset)| *subset == d.subset && host_matches(host, &d.host));
                if !found {
                    out.push(format!(
                        "VirtualService {}/{}: subset {:?} of {} is not defined by any DestinationRule (requests to it will fail with 503)",
                        vs.namespace, vs.name, d.subset, d.host
                    ));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}
