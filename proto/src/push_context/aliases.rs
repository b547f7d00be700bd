//! ExternalName Services as Istio treats them (`resolveServiceAliases`): a Kubernetes
//! Service of type ExternalName naming a service of the mesh is an alias of it, not a
//! service of its own. It gets no listener and no cluster; a call to its name is routed
//! by the aliased service's virtual host, which carries the alias's names too.
//!
//! ```text
//!  legacy (ExternalName → reviews.shop.svc.cluster.local) ─┐
//!  old    (ExternalName → legacy.shop.svc.cluster.local) ──┴─► reviews: aliases [legacy, old]
//! ```
//! An ExternalName naming no service of the scope stays a DNS service of its own (Envoy
//! resolves the name), as before.

use crate::model::Service;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The ExternalName Services aliasing each concrete service, by its hostname.
pub(super) type Aliases = HashMap<String, Vec<Arc<Service>>>;

/// How many aliases of aliases are followed before giving up (a loop).
const MAX_HOPS: usize = 8;

/// Splits `services` (one per hostname, sorted) into the concrete ones, still sorted,
/// and the aliases of each concrete hostname, sorted by (namespace, hostname).
pub(super) fn split(services: Vec<Arc<Service>>) -> (Vec<Arc<Service>>, Aliases) {
    let target = |s: &Service| -> Option<String> {
        (!s.external_name.is_empty())
            .then(|| s.external_name.trim_end_matches('.').to_ascii_lowercase())
    };
    let by_host: BTreeMap<&str, &Arc<Service>> =
        services.iter().map(|s| (s.hostname.as_str(), s)).collect();
    let mut aliases = Aliases::new();
    for svc in &services {
        let Some(mut next) = target(svc) else {
            continue;
        };
        let mut concrete = None;
        for _ in 0..MAX_HOPS {
            match by_host.get(next.as_str()) {
                None => break,
                Some(s) => match target(s) {
                    Some(further) => next = further,
                    None => {
                        concrete = Some(s.hostname.clone());
                        break;
                    }
                },
            }
        }
        if let Some(host) = concrete {
            aliases.entry(host).or_default().push(svc.clone());
        }
    }
    if aliases.is_empty() {
        return (services, aliases);
    }
    for list in aliases.values_mut() {
        list.sort_by(|a, b| (&a.namespace, &a.hostname).cmp(&(&b.namespace, &b.hostname)));
    }
    let aliased: std::collections::HashSet<&str> = aliases
        .values()
        .flatten()
        .map(|s| s.hostname.as_str())
        .collect();
    let concrete = services
        .iter()
        .filter(|s| !aliased.contains(s.hostname.as_str()))
        .cloned()
        .collect();
    (concrete, aliases)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ExportTo, Resolution};

    fn svc(name: &str, external: &str) -> Arc<Service> {
        Arc::new(Service {
            hostname: format!("{name}.shop.svc.cluster.local"),
            namespace: "shop".into(),
            name: name.into(),
            ports: vec![],
            addresses: vec![],
            resolution: if external.is_empty() {
                Resolution::ClientSideLb
            } else {
                Resolution::Dns
            },
            mesh_external: false,
            export_to: ExportTo::default(),
            labels: Default::default(),
            clusters: vec![],
            external_name: external.into(),
        })
    }

    /// Istio's `resolveServiceAliases`: aliases of aliases resolve to the concrete
    /// service; a loop, or a name outside the mesh, is no alias.
    #[test]
    fn external_names_alias_the_services_they_name() {
        let services = vec![
            svc("a", "b.shop.svc.cluster.local"),
            svc("b", "c.shop.svc.cluster.local"),
            svc("c", ""),
            svc("ext", "db.example.com"),
            svc("x", "y.shop.svc.cluster.local"),
            svc("y", "x.shop.svc.cluster.local."),
        ];
        let (concrete, aliases) = split(services);
        let names: Vec<&str> = concrete.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["c", "ext", "x", "y"]);
        let of_c: Vec<&str> = aliases["c.shop.svc.cluster.local"]
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(of_c, ["a", "b"]);
        assert_eq!(aliases.len(), 1);
    }
}
