use super::ConfigIndex;
use crate::change::ChangeKey;
use crate::config::{ConfigKey, Kind, istio};
use crate::model::{NamedConfig, Service, host_matches, hosts_intersect};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrafficMode {
    AllowAny,
    RegistryOnly,
}

/// What one group of proxies can see: the services, VirtualServices and DestinationRules
/// its Sidecar's egress hosts select (everything, without a Sidecar). Every proxy in a
/// namespace with the same Sidecar shares one scope, and so can share generated xDS.
#[derive(Debug)]
pub struct SidecarScope {
    /// `namespace/name@proxy-namespace` of the Sidecar, or `namespace/default` without
    /// one; followed by `+dr:name,...` when selector DestinationRules select the proxies.
    pub id: String,
    /// The proxies' namespace.
    pub namespace: String,
    /// The mesh's root namespace, whose Sidecar reshapes every scope.
    root_namespace: String,
    /// The index generation the scope was computed from.
    pub generation: u64,
    /// The [`ConfigIndex::id`](super::ConfigIndex) of that index.
    pub index_id: u64,
    /// Visible services, one per hostname, sorted by hostname; ExternalName Services
    /// that alias one of them are not among them (see `aliases_of`).
    pub services: Vec<Arc<Service>>,
    /// The ExternalName Services aliasing each service, by its hostname.
    aliases: super::aliases::Aliases,
    /// Visible VirtualServices in Istio's order (`istio_order`): of two for a host the
    /// first wins.
    pub virtual_services: Vec<Arc<NamedConfig<istio::VirtualService>>>,
    /// The delegate VirtualServices those delegate to, by (namespace, name).
    delegates: HashMap<(String, String), Arc<NamedConfig<istio::VirtualService>>>,
    /// The egress listeners of the Sidecar (empty without one).
    pub egress: Vec<istio::EgressListener>,
    /// The ingress listeners of the Sidecar: when any, they replace the inbound listeners
    /// the workload's services would give it (empty without a Sidecar).
    pub ingress: Vec<istio::IngressListener>,
    pub outbound_mode: TrafficMode,
    /// With [`TrafficMode::AllowAny`], where traffic to unknown hosts goes instead of
    /// passing through (the Sidecar's `outboundTrafficPolicy.egressProxy`).
    pub egress_proxy: Option<istio::Destination>,
    destination_rules: HashMap<String, Arc<NamedConfig<istio::DestinationRule>>>,
    hosts: HashSet<String>,
    /// The routing objects this scope uses, for the debug view.
    pub configs: HashSet<ConfigKey>,
}

/// The order in which Istio takes the VirtualServices a proxy of `proxy_ns` sees, so
/// that of two for one host the first wins (`SelectVirtualServices`,
/// `VirtualServicesForGateway`): those private to the namespace, then those exported to
/// it by name, then the public ones; within each the oldest first
/// (`sortConfigByCreationTime`: creation time, then name, then namespace).
pub fn istio_order<'a>(
    vs: &'a NamedConfig<istio::VirtualService>,
    proxy_ns: &str,
) -> (u8, i64, &'a str, &'a str) {
    let export = &vs.spec.export_to;
    let class = if export.is_empty() || export.iter().any(|e| e == "*") {
        2
    } else if vs.namespace == proxy_ns && export.iter().any(|e| e == "." || e == proxy_ns) {
        0
    } else {
        1
    };
    (class, vs.created, &vs.name, &vs.namespace)
}

/// One `namespace/host` egress selector.
struct HostSelector {
    namespace: String,
    host: String,
}

impl HostSelector {
    fn parse(entry: &str, proxy_ns: &str) -> Option<Self> {
        let (ns, host) = entry.split_once('/')?;
        let namespace = match ns {
            "." => proxy_ns.to_string(),
            "~" => return None,
            other => other.to_string(),
        };
        Some(HostSelector {
            namespace,
            host: host.to_string(),
        })
    }

    fn selects_ns(&self, ns: &str) -> bool {
        self.namespace == "*" || self.namespace == ns
    }
}

impl SidecarScope {
    /// `selector_rules`: the DestinationRules of `proxy_ns` whose `workloadSelector`
    /// selects the proxies; other selector rules do not apply to them.
    pub(super) fn new(
        index: &ConfigIndex,
        proxy_ns: &str,
        sidecar: Option<&NamedConfig<istio::Sidecar>>,
        selector_rules: &[&Arc<NamedConfig<istio::DestinationRule>>],
    ) -> Self {
        let egress = sidecar.map(|s| s.spec.egress.clone()).unwrap_or_default();
        let ingress = sidecar.map(|s| s.spec.ingress.clone()).unwrap_or_default();
        // A Sidecar without egress listeners (only an outbound policy) sees everything,
        // as Istio's default egress listener (`*/*`) does.
        let selectors: Vec<HostSelector> = match sidecar.filter(|sc| !sc.spec.egress.is_empty()) {
            Some(sc) => sc
                .spec
                .egress
                .iter()
                .flat_map(|e| e.hosts.iter())
                .filter_map(|h| HostSelector::parse(h, proxy_ns))
                .collect(),
            None => vec![HostSelector {
                namespace: "*".into(),
                host: "*".into(),
            }],
        };
        // The Sidecar's policy, else the mesh config's (Istio's default: ALLOW_ANY).
        let outbound_mode = match sidecar
            .and_then(|s| s.spec.outbound_traffic_policy.as_ref())
            .map(|p| p.mode.as_str())
            .filter(|mode| !mode.is_empty())
        {
            Some("REGISTRY_ONLY") => TrafficMode::RegistryOnly,
            Some(_) => TrafficMode::AllowAny,
            None if index.mesh.registry_only() => TrafficMode::RegistryOnly,
            None => TrafficMode::AllowAny,
        };
        let egress_proxy = sidecar
            .and_then(|s| s.spec.outbound_traffic_policy.as_ref())
            .filter(|_| outbound_mode == TrafficMode::AllowAny)
            .and_then(|p| p.egress_proxy.clone());

        let mut configs = HashSet::new();
        if let Some(sc) = sidecar {
            configs.insert(ConfigKey::new(Kind::Sidecar, &sc.namespace, &sc.name));
        }

        // VirtualServices: visible from the proxy namespace and selected by a host entry.
        let mut virtual_services: Vec<_> = index
            .virtual_services
            .iter()
            .filter(|vs| export_visible(&vs.spec.export_to, &vs.namespace, proxy_ns))
            .filter(|vs| {
                selectors.iter().any(|sel| {
                    sel.selects_ns(&vs.namespace)
                        && vs.spec.hosts.iter().any(|h| hosts_intersect(&sel.host, h))
                })
            })
            .cloned()
            .collect();
        virtual_services.sort_by(|a, b| istio_order(a, proxy_ns).cmp(&istio_order(b, proxy_ns)));
        for vs in &virtual_services {
            configs.insert(ConfigKey::new(
                Kind::VirtualService,
                &vs.namespace,
                &vs.name,
            ));
        }

        // Delegates: found by (namespace, name), when exported to the delegating
        // VirtualService's namespace.
        let mut delegates = HashMap::new();
        for vs in &virtual_services {
            for d in vs.spec.http.iter().filter_map(|r| r.delegate.as_ref()) {
                let ns = if d.namespace.is_empty() {
                    vs.namespace.clone()
                } else {
                    d.namespace.clone()
                };
                let key = (ns, d.name.clone());
                if let Some(delegate) = index.delegates.get(&key)
                    && export_visible(&delegate.spec.export_to, &delegate.namespace, &vs.namespace)
                {
                    configs.insert(ConfigKey::new(
                        Kind::VirtualService,
                        &delegate.namespace,
                        &delegate.name,
                    ));
                    delegates.insert(key, delegate.clone());
                }
            }
        }

        // Services: visible and selected, plus every visible destination of a selected VS
        // (and of the VirtualServices it delegates to).
        let vs_destinations: HashSet<&str> = virtual_services
            .iter()
            .chain(delegates.values())
            .flat_map(|vs| destination_hosts(&vs.spec))
            .collect();
        let mut by_host: BTreeMap<String, Arc<Service>> = BTreeMap::new();
        for svc in &index.services {
            if !svc.export_to.visible(&svc.namespace, proxy_ns) {
                continue;
            }
            let selected = selectors.iter().any(|sel| {
                sel.selects_ns(&svc.namespace) && host_matches(&sel.host, &svc.hostname)
            }) || vs_destinations.contains(svc.hostname.as_str());
            if !selected {
                continue;
            }
            // One service per hostname: the proxy's own namespace wins, then the first.
            match by_host.get(&svc.hostname) {
                Some(existing) if existing.namespace == proxy_ns => {}
                Some(_) if svc.namespace != proxy_ns => {}
                _ => {
                    by_host.insert(svc.hostname.clone(), svc.clone());
                }
            }
        }
        let services: Vec<_> = by_host.into_values().collect();
        let hosts: HashSet<String> = services.iter().map(|s| s.hostname.clone()).collect();
        let (services, aliases) = super::aliases::split(services);

        // DestinationRules: for each service, the proxy namespace's, else the service
        // namespace's, else the root namespace's (Istio never looks elsewhere); within
        // that namespace the most specific host; of its rules, those whose selector
        // selects the proxies if any (Istio's precedence), else the selector-less ones,
        // merged.
        let applies = |dr: &Arc<NamedConfig<istio::DestinationRule>>| {
            dr.spec.workload_selector.is_none() || selector_rules.iter().any(|s| Arc::ptr_eq(s, dr))
        };
        let mut destination_rules = HashMap::new();
        for svc in &services {
            let candidates: Vec<&Arc<NamedConfig<istio::DestinationRule>>> = index
                .destination_rule_candidates(&svc.hostname)
                .filter(|dr| {
                    host_matches(&dr.spec.host, &svc.hostname)
                        && export_visible(&dr.spec.export_to, &dr.namespace, proxy_ns)
                        && applies(dr)
                })
                .collect();
            let levels = [
                proxy_ns,
                svc.namespace.as_str(),
                index.root_namespace.as_str(),
            ];
            let Some(level) = levels
                .iter()
                .find(|ns| candidates.iter().any(|dr| dr.namespace == **ns))
            else {
                continue;
            };
            let mut rules: Vec<_> = candidates
                .into_iter()
                .filter(|dr| dr.namespace == *level)
                .collect();
            // Exact before wildcard, then the longest wildcard.
            let best = rules
                .iter()
                .map(|dr| dr.spec.host.as_str())
                .min_by_key(|h| (h.starts_with('*'), std::cmp::Reverse(h.len())))
                .map(str::to_string);
            rules.retain(|dr| Some(&dr.spec.host) == best.as_ref());
            rules.sort_by(|a, b| a.name.cmp(&b.name));
            keep_most_selective(&mut rules);
            for dr in &rules {
                configs.insert(ConfigKey::new(
                    Kind::DestinationRule,
                    &dr.namespace,
                    &dr.name,
                ));
            }
            if let Some(rule) = merge_destination_rules(&rules) {
                destination_rules.insert(svc.hostname.clone(), rule);
            }
        }
        let mut id = match sidecar {
            Some(sc) => format!("{}/{}@{proxy_ns}", sc.namespace, sc.name),
            None => format!("{proxy_ns}/default"),
        };
        if !selector_rules.is_empty() {
            let names: Vec<&str> = selector_rules.iter().map(|r| r.name.as_str()).collect();
            id.push_str(&format!("+dr:{}", names.join(",")));
        }

        SidecarScope {
            id,
            namespace: proxy_ns.to_string(),
            root_namespace: index.root_namespace.clone(),
            generation: index.generation,
            index_id: index.id,
            services,
            aliases,
            virtual_services,
            delegates,
            egress,
            ingress,
            outbound_mode,
            egress_proxy,
            destination_rules,
            hosts,
            configs,
        }
    }

    /// The DestinationRule that applies to traffic for `hostname`.
    pub fn destination_rule(
        &self,
        hostname: &str,
    ) -> Option<&Arc<NamedConfig<istio::DestinationRule>>> {
        self.destination_rules.get(hostname)
    }

    /// Every delegate VirtualService the scope's VirtualServices delegate to.
    pub fn delegates(&self) -> impl Iterator<Item = &Arc<NamedConfig<istio::VirtualService>>> {
        self.delegates.values()
    }

    /// The delegate VirtualService a route of a VirtualService in `vs_namespace` names.
    pub fn delegate(
        &self,
        vs_namespace: &str,
        delegate: &istio::Delegate,
    ) -> Option<&Arc<NamedConfig<istio::VirtualService>>> {
        let ns = if delegate.namespace.is_empty() {
            vs_namespace
        } else {
            delegate.namespace.as_str()
        };
        self.delegates.get(&(ns.to_string(), delegate.name.clone()))
    }

    /// The first VirtualService whose hosts match `hostname`.
    pub fn virtual_service_for(
        &self,
        hostname: &str,
    ) -> Option<&Arc<NamedConfig<istio::VirtualService>>> {
        self.virtual_services
            .iter()
            .find(|vs| vs.spec.hosts.iter().any(|h| host_matches(h, hostname)))
    }

    /// The ExternalName Services of the scope that alias `hostname` (Istio's
    /// `Aliases`), sorted by (namespace, hostname).
    pub fn aliases_of(&self, hostname: &str) -> &[Arc<Service>] {
        self.aliases.get(hostname).map_or(&[], Vec::as_slice)
    }

    pub fn service(&self, hostname: &str) -> Option<&Arc<Service>> {
        self.services
            .binary_search_by(|s| s.hostname.as_str().cmp(hostname))
            .ok()
            .map(|i| &self.services[i])
    }

    pub fn has_host(&self, hostname: &str) -> bool {
        self.hosts.contains(hostname)
    }

    /// Whether a change to `key` can change this scope's config (Istio's
    /// `SidecarScope.DependsOnConfig`).
    pub fn depends_on(&self, key: &ChangeKey) -> bool {
        match key {
            ChangeKey::Service(service) => self.hosts.contains(&service.hostname),
            ChangeKey::Host(host) => self.hosts.contains(host),
            ChangeKey::Config(config) => match config.kind {
                // Gateways and their credentials configure routers, not sidecars.
                Kind::Gateway | Kind::Secret => false,
                // A Sidecar reshapes its own namespace's scopes; in the root namespace, all.
                Kind::Sidecar => {
                    config.namespace == self.namespace || config.namespace == self.root_namespace
                }
                // An object not narrowed to hostnames may start to apply to any scope.
                _ => true,
            },
        }
    }

    /// Whether an endpoint change to `key` concerns a cluster of this scope.
    pub fn sees_endpoints_of(&self, key: &ChangeKey) -> bool {
        match key.hostname() {
            Some(host) => self.hosts.contains(host),
            // An object not named by service: any cluster may be concerned.
            None => true,
        }
    }
}

/// Of the rules for one host (sorted by name), keeps those that apply first: when some
/// have a workload selector (one selecting the proxies), the first of them and those with
/// the same selector, as Istio prefers a selecting rule to the namespace-wide one and
/// merges only rules with equal selectors; else every rule (all selector-less).
fn keep_most_selective(rules: &mut Vec<&Arc<NamedConfig<istio::DestinationRule>>>) {
    let Some(first) = rules
        .iter()
        .find_map(|dr| dr.spec.workload_selector.clone())
    else {
        return;
    };
    rules.retain(|dr| dr.spec.workload_selector.as_ref() == Some(&first));
}

/// Several DestinationRules for one host in one namespace, merged as Istio merges them
/// (`mergeDestinationRule`): the first traffic policy set wins, and subsets are
/// appended, a later subset of a name already defined being dropped.
fn merge_destination_rules(
    rules: &[&Arc<NamedConfig<istio::DestinationRule>>],
) -> Option<Arc<NamedConfig<istio::DestinationRule>>> {
    let (first, rest) = rules.split_first()?;
    if rest.is_empty() {
        return Some((*first).clone());
    }
    let mut merged = (***first).clone();
    for dr in rest {
        if merged.spec.traffic_policy.is_none() {
            merged
                .spec
                .traffic_policy
                .clone_from(&dr.spec.traffic_policy);
        }
        for subset in &dr.spec.subsets {
            if !merged.spec.subsets.iter().any(|s| s.name == subset.name) {
                merged.spec.subsets.push(subset.clone());
            }
        }
    }
    Some(Arc::new(merged))
}

/// Every host a VirtualService sends traffic to: route destinations and mirrors (Istio's
/// `VirtualServiceDestinationHosts`).
fn destination_hosts(vs: &istio::VirtualService) -> impl Iterator<Item = &str> {
    let http = vs.http.iter().flat_map(|r| {
        r.route
            .iter()
            .map(|d| &d.destination)
            .chain(&r.mirror)
            .chain(r.mirrors.iter().map(|m| &m.destination))
    });
    let l4 = vs
        .tcp
        .iter()
        .flat_map(|r| r.route.iter())
        .chain(vs.tls.iter().flat_map(|r| r.route.iter()))
        .map(|d| &d.destination);
    http.chain(l4).map(|d| d.host.as_str())
}

fn export_visible(export_to: &[String], owner: &str, from: &str) -> bool {
    crate::model::export_visible(export_to, owner, from)
}
