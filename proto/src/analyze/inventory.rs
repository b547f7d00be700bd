//! The accepted objects of one analysis, by kind, and the service hosts they define.

use super::hosts::ServiceHosts;
use crate::config::parse::Parsed;
use crate::config::{Spec, istio, k8s};
use std::collections::BTreeMap;

pub(super) struct Inventory<'a> {
    objects: Vec<&'a Parsed>,
    pub hosts: ServiceHosts<'a>,
}

/// Generates a typed iterator over the objects of one kind.
macro_rules! of_kind {
    ($fn:ident, $variant:ident, $ty:ty) => {
        pub fn $fn(&self) -> impl Iterator<Item = (&'a Parsed, &'a $ty)> + '_ {
            self.objects
                .iter()
                .copied()
                .filter_map(|p| match &p.config.spec {
                    Spec::$variant(spec) => Some((p, spec)),
                    _ => None,
                })
        }
    };
}

impl<'a> Inventory<'a> {
    pub fn new(objects: impl Iterator<Item = &'a Parsed>) -> Self {
        let objects: Vec<&'a Parsed> = objects.collect();
        let hosts = ServiceHosts::new(&objects);
        Self { objects, hosts }
    }

    of_kind!(virtual_services, VirtualService, istio::VirtualService);
    of_kind!(destination_rules, DestinationRule, istio::DestinationRule);
    of_kind!(gateways, Gateway, istio::Gateway);
    of_kind!(sidecars, Sidecar, istio::Sidecar);
    of_kind!(pods, Pod, k8s::PodSpec);
    of_kind!(secrets, Secret, k8s::SecretSpec);

    /// PeerAuthentications, AuthorizationPolicies and RequestAuthentications.
    pub fn security_policies(&self) -> impl Iterator<Item = &'a Parsed> + '_ {
        self.objects.iter().copied().filter(|p| {
            matches!(
                p.config.spec,
                Spec::PeerAuthentication(_)
                    | Spec::AuthorizationPolicy(_)
                    | Spec::RequestAuthentication(_)
            )
        })
    }

    /// The mesh's root namespace: a given mesh config's, else Istio's default.
    pub fn root_namespace(&self) -> &'a str {
        self.objects
            .iter()
            .find_map(|p| match &p.config.spec {
                Spec::MeshConfig(mesh) => Some(mesh.root_namespace()),
                _ => None,
            })
            .unwrap_or(crate::model::ROOT_NAMESPACE)
    }

    /// The mesh config given, if any.
    pub fn mesh_config(&self) -> Option<&'a crate::config::mesh::MeshConfig> {
        self.objects.iter().find_map(|p| match &p.config.spec {
            Spec::MeshConfig(mesh) => Some(mesh),
            _ => None,
        })
    }

    /// The names of the Namespace objects given.
    pub fn namespace_names(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.objects
            .iter()
            .filter(|p| matches!(p.config.spec, Spec::Namespace(_)))
            .map(|p| p.config.meta.name.as_str())
    }

    /// Whether any Pod was given: checks that a selector matches no Pod run only then,
    /// since a directory of config alone says nothing about the workloads running.
    pub fn has_pods(&self) -> bool {
        self.pods().next().is_some()
    }

    /// Pods (in `namespace`, when given) whose labels include every label of `selector`.
    pub fn pods_matching(
        &self,
        namespace: Option<&str>,
        selector: &BTreeMap<String, String>,
    ) -> impl Iterator<Item = &'a Parsed> {
        self.pods()
            .map(|(p, _)| p)
            .filter(move |p| namespace.is_none_or(|ns| p.config.meta.namespace == ns))
            .filter(move |p| labels_include(&p.config.meta.labels, selector))
    }
}

/// Whether `labels` has every pair of `selector` (an empty selector selects everything).
pub(super) fn labels_include(
    labels: &BTreeMap<String, String>,
    selector: &BTreeMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// `a=1,b=2`, as Kubernetes prints a label selector.
pub(super) fn selector_string(selector: &BTreeMap<String, String>) -> String {
    selector
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}
