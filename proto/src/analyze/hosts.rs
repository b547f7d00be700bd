//! The hosts Services and ServiceEntries define, who can see them, and how a
//! destination's host is found among them (as Istio's analyzers' service lookup does:
//! short names resolved in the referrer's namespace, wildcard ServiceEntry hosts matched
//! by suffix).

use crate::config::parse::Parsed;
use crate::config::{Spec, istio};
use crate::model::{export_visible, host_matches, resolve_short_name};
use std::collections::BTreeMap;

/// Kubernetes' annotation for a Service's `exportTo`.
const EXPORT_TO_ANNOTATION: &str = "networking.istio.io/exportTo";

/// What selects a host's workloads.
pub(super) enum Workloads<'a> {
    /// A Service's or ServiceEntry's label selector over Pods in its namespace.
    Selector(&'a BTreeMap<String, String>),
    /// A ServiceEntry's inline endpoints.
    Endpoints(&'a [istio::WorkloadEntry]),
    /// Nothing Shoal can check (a Service without selector, a DNS ServiceEntry...).
    Unknown,
}

/// One host a Service or ServiceEntry defines.
pub(super) struct ServiceHost<'a> {
    /// Fully qualified, or a `*.suffix` wildcard.
    pub host: String,
    pub namespace: &'a str,
    export_to: Vec<String>,
    pub ports: Vec<u32>,
    pub workloads: Workloads<'a>,
}

impl ServiceHost<'_> {
    /// Visible from any of `namespaces` (`None`: from any namespace).
    fn visible_from(&self, namespaces: Option<&[String]>) -> bool {
        match namespaces {
            None => true,
            Some(list) => list
                .iter()
                .any(|ns| export_visible(&self.export_to, self.namespace, ns)),
        }
    }
}

/// Every host of the analysed Services and ServiceEntries.
pub(super) struct ServiceHosts<'a> {
    hosts: Vec<ServiceHost<'a>>,
}

impl<'a> ServiceHosts<'a> {
    pub fn new(objects: &[&'a Parsed]) -> Self {
        let mut hosts = Vec::new();
        for &parsed in objects {
            let meta = &parsed.config.meta;
            match &parsed.config.spec {
                Spec::Service(svc) => hosts.push(ServiceHost {
                    host: resolve_short_name(&meta.name, &meta.namespace),
                    namespace: &meta.namespace,
                    export_to: meta
                        .annotations
                        .get(EXPORT_TO_ANNOTATION)
                        .map(|v| {
                            v.split(',')
                                .map(str::trim)
                                .filter(|s| !s.is_empty())
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default(),
                    ports: svc.ports.iter().map(|p| p.port).collect(),
                    workloads: if svc.selector.is_empty() {
                        Workloads::Unknown
                    } else {
                        Workloads::Selector(&svc.selector)
                    },
                }),
                Spec::ServiceEntry(se) => {
                    for host in &se.hosts {
                        hosts.push(ServiceHost {
                            host: resolve_short_name(host, &meta.namespace),
                            namespace: &meta.namespace,
                            export_to: se.export_to.clone(),
                            ports: se.ports.iter().map(|p| p.number).collect(),
                            workloads: match (&se.workload_selector, se.endpoints.is_empty()) {
                                (Some(ws), _) => Workloads::Selector(&ws.labels),
                                (None, false) => Workloads::Endpoints(&se.endpoints),
                                (None, true) => Workloads::Unknown,
                            },
                        });
                    }
                }
                _ => {}
            }
        }
        Self { hosts }
    }

    /// The service `host` (already fully qualified) names, as seen from `namespaces`
    /// (`None`: from anywhere): an exact host first, else a wildcard ServiceEntry host
    /// covering it.
    pub fn find(&self, host: &str, namespaces: Option<&[String]>) -> Option<&ServiceHost<'a>> {
        let visible = |h: &&ServiceHost<'a>| h.visible_from(namespaces);
        self.hosts
            .iter()
            .filter(visible)
            .find(|h| h.host == host)
            .or_else(|| {
                self.hosts
                    .iter()
                    .filter(visible)
                    .find(|h| h.host.starts_with('*') && host_matches(&h.host, host))
            })
    }

    /// The namespaces defining exactly `host`.
    pub fn namespaces_of(&self, host: &str) -> Vec<String> {
        let mut out: Vec<String> = (self.hosts.iter())
            .filter(|h| h.host == host)
            .map(|h| h.namespace.to_string())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Whether some host matches the wildcard `pattern` (`*.shop.svc.cluster.local`).
    pub fn any_matching(&self, pattern: &str) -> bool {
        self.hosts.iter().any(|h| host_matches(pattern, &h.host))
    }
}

/// The namespaces config of `namespace` with `export_to` is seen from, as the lookups
/// above take them: its own when `export_to` is empty, else those listed (`None` for `*`).
pub(super) fn seen_from(namespace: &str, export_to: &[String]) -> Option<Vec<String>> {
    if export_to.is_empty() {
        return Some(vec![namespace.to_string()]);
    }
    let mut out = Vec::new();
    for e in export_to {
        match e.as_str() {
            "*" => return None,
            "." => out.push(namespace.to_string()),
            "~" => {}
            ns => out.push(ns.to_string()),
        }
    }
    if out.is_empty() {
        // Exported nowhere (`~`): what its own namespace sees is still what it means.
        out.push(namespace.to_string());
    }
    Some(out)
}
