//! The mesh root published as the ConfigMap `istio-ca-root-cert` (key `root-cert.pem`) in
//! every mesh namespace, as istiod's namespace controller does: workloads mount it to
//! verify the control plane (the agent's `XDS_ROOT_CA`) before they hold a certificate.
//! This module decides, without I/O, which namespaces need a write; the edge watches
//! Namespaces and these ConfigMaps and makes the writes.

use crate::config::selector::LabelSelector;
use std::collections::BTreeMap;

/// The ConfigMap's name, in every namespace.
pub const CONFIGMAP_NAME: &str = "istio-ca-root-cert";
/// The key holding the PEM bundle.
pub const ROOT_CERT_KEY: &str = "root-cert.pem";
/// The label istiod puts on it.
pub const CONFIG_LABEL: (&str, &str) = ("istio.io/config", "true");
/// Namespaces never given one (Istio's ignored namespaces: no workload there is meshed).
pub const IGNORED_NAMESPACES: &[&str] = &[
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "local-path-storage",
];

/// Which namespaces are the mesh's: those named (none: all), of those the ones a
/// discovery selector matches (none: all), less Istio's ignored namespaces.
#[derive(Clone, Debug, Default)]
pub struct NamespaceFilter {
    pub namespaces: Vec<String>,
    pub discovery_selectors: Vec<LabelSelector>,
}

impl NamespaceFilter {
    pub fn selects(&self, namespace: &Namespace<'_>) -> bool {
        !IGNORED_NAMESPACES.contains(&namespace.name)
            && (self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == namespace.name))
            && (self.discovery_selectors.is_empty()
                || self
                    .discovery_selectors
                    .iter()
                    .any(|s| s.matches(namespace.labels)))
    }
}

/// A Namespace as the plan needs it.
#[derive(Clone, Copy, Debug)]
pub struct Namespace<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    /// Being deleted: the API server refuses new objects in it.
    pub terminating: bool,
}

/// The `istio-ca-root-cert` ConfigMap found in a namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published<'a> {
    pub resource_version: &'a str,
    /// Its `root-cert.pem`, if it has one.
    pub root_cert: Option<&'a str>,
}

/// One write the plan asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RootCertWrite {
    /// No ConfigMap there yet.
    Create { namespace: String },
    /// The ConfigMap holds another bundle (or none): replace it at this version, keeping
    /// its other keys.
    Update {
        namespace: String,
        resource_version: String,
    },
}

impl RootCertWrite {
    pub fn namespace(&self) -> &str {
        match self {
            RootCertWrite::Create { namespace } | RootCertWrite::Update { namespace, .. } => {
                namespace
            }
        }
    }
}

/// The writes that make every selected, live namespace this edge `owns` hold `bundle`,
/// in namespace order. A namespace already holding it needs none, so a steady mesh costs
/// no writes and edges that agree on the bundle never fight.
pub fn plan<'a>(
    namespaces: impl IntoIterator<Item = Namespace<'a>>,
    published: &BTreeMap<&str, Published<'_>>,
    bundle: &str,
    filter: &NamespaceFilter,
    owns: impl Fn(&str) -> bool,
) -> Vec<RootCertWrite> {
    let mut writes: Vec<RootCertWrite> = namespaces
        .into_iter()
        .filter(|ns| !ns.terminating && filter.selects(ns) && owns(ns.name))
        .filter_map(|ns| match published.get(ns.name) {
            None => Some(RootCertWrite::Create {
                namespace: ns.name.to_owned(),
            }),
            Some(found) if found.root_cert == Some(bundle) => None,
            Some(found) => Some(RootCertWrite::Update {
                namespace: ns.name.to_owned(),
                resource_version: found.resource_version.to_owned(),
            }),
        })
        .collect();
    writes.sort_by(|a, b| a.namespace().cmp(b.namespace()));
    writes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn ns<'a>(name: &'a str, labels: &'a BTreeMap<String, String>) -> Namespace<'a> {
        Namespace {
            name,
            labels,
            terminating: false,
        }
    }

    const BUNDLE: &str = "-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n";

    #[test]
    fn every_mesh_namespace_without_the_bundle_gets_one_and_the_ignored_ones_none() {
        let none = BTreeMap::new();
        let published = BTreeMap::from([
            (
                "current",
                Published {
                    resource_version: "7",
                    root_cert: Some(BUNDLE),
                },
            ),
            (
                "stale",
                Published {
                    resource_version: "9",
                    root_cert: Some("old"),
                },
            ),
            (
                "emptied",
                Published {
                    resource_version: "3",
                    root_cert: None,
                },
            ),
        ]);
        let namespaces = ["stale", "kube-system", "fresh", "current", "emptied"];
        let writes = plan(
            namespaces.iter().map(|n| ns(n, &none)),
            &published,
            BUNDLE,
            &NamespaceFilter::default(),
            |_| true,
        );
        assert_eq!(
            writes,
            vec![
                RootCertWrite::Update {
                    namespace: "emptied".into(),
                    resource_version: "3".into()
                },
                RootCertWrite::Create {
                    namespace: "fresh".into()
                },
                RootCertWrite::Update {
                    namespace: "stale".into(),
                    resource_version: "9".into()
                },
            ]
        );
    }

    #[test]
    fn only_selected_live_owned_namespaces_are_written() {
        let mesh = labels(&[("istio-discovery", "enabled")]);
        let other = BTreeMap::new();
        let filter = NamespaceFilter {
            namespaces: vec![],
            discovery_selectors: vec![LabelSelector::parse("istio-discovery=enabled").unwrap()],
        };
        let mut dying = ns("dying", &mesh);
        dying.terminating = true;
        let writes = plan(
            [
                ns("a", &mesh),
                ns("b", &other),
                ns("c", &mesh),
                dying,
                ns("d", &mesh),
            ],
            &BTreeMap::new(),
            BUNDLE,
            &filter,
            |name| name != "c",
        );
        let written: Vec<&str> = writes.iter().map(RootCertWrite::namespace).collect();
        assert_eq!(written, ["a", "d"]);

        let named = NamespaceFilter {
            namespaces: vec!["b".into()],
            discovery_selectors: vec![],
        };
        let writes = plan(
            [ns("a", &mesh), ns("b", &other)],
            &BTreeMap::new(),
            BUNDLE,
            &named,
            |_| true,
        );
        assert_eq!(writes.len(), 1);
        assert_eq!(writes[0].namespace(), "b");
    }
}
