use serde::{Deserialize, Serialize};
use std::fmt;

/// Every kind of object Shoal reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Kind {
    Namespace,
    Service,
    Pod,
    EndpointSlice,
    Endpoints,
    ServiceEntry,
    WorkloadEntry,
    /// A template for WorkloadEntries: entries naming their group inherit from it.
    WorkloadGroup,
    VirtualService,
    DestinationRule,
    Sidecar,
    Gateway,
    /// TLS Secrets, for gateways' `credentialName` (only those holding TLS material).
    Secret,
    /// Istio's mesh config: the ConfigMap `istio` (or `istio-<revision>`), key `mesh`.
    MeshConfig,
    // security.istio.io, last so that encoded kinds keep their numbers.
    PeerAuthentication,
    AuthorizationPolicy,
    RequestAuthentication,
}

impl Kind {
    pub const ALL: [Kind; 17] = [
        Kind::Namespace,
        Kind::Service,
        Kind::Pod,
        Kind::EndpointSlice,
        Kind::Endpoints,
        Kind::ServiceEntry,
        Kind::WorkloadEntry,
        Kind::WorkloadGroup,
        Kind::VirtualService,
        Kind::DestinationRule,
        Kind::Sidecar,
        Kind::Gateway,
        Kind::Secret,
        Kind::MeshConfig,
        Kind::PeerAuthentication,
        Kind::AuthorizationPolicy,
        Kind::RequestAuthentication,
    ];

    /// Resolves a YAML document's `apiVersion` and `kind`. Istio's networking kinds are
    /// accepted in `v1`, `v1beta1` and `v1alpha3`, its security kinds in `v1` and
    /// `v1beta1`, as Istio itself serves them.
    pub fn from_api(api_version: &str, kind: &str) -> Option<Kind> {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let k = match (group, kind) {
            ("", "Namespace") => Kind::Namespace,
            ("", "Service") => Kind::Service,
            ("", "Pod") => Kind::Pod,
            ("", "Endpoints") => Kind::Endpoints,
            ("", "Secret") => Kind::Secret,
            ("", "ConfigMap") => Kind::MeshConfig,
            ("discovery.k8s.io", "EndpointSlice") => Kind::EndpointSlice,
            ("networking.istio.io", "ServiceEntry") => Kind::ServiceEntry,
            ("networking.istio.io", "WorkloadEntry") => Kind::WorkloadEntry,
            ("networking.istio.io", "WorkloadGroup") => Kind::WorkloadGroup,
            ("networking.istio.io", "VirtualService") => Kind::VirtualService,
            ("networking.istio.io", "DestinationRule") => Kind::DestinationRule,
            ("networking.istio.io", "Sidecar") => Kind::Sidecar,
            ("networking.istio.io", "Gateway") => Kind::Gateway,
            ("security.istio.io", "PeerAuthentication") => Kind::PeerAuthentication,
            ("security.istio.io", "AuthorizationPolicy") => Kind::AuthorizationPolicy,
            ("security.istio.io", "RequestAuthentication") => Kind::RequestAuthentication,
            _ => return None,
        };
        let version_ok = match group {
            "" => version == "v1",
            "discovery.k8s.io" => version == "v1",
            "security.istio.io" => matches!(version, "v1" | "v1beta1"),
            _ => matches!(version, "v1" | "v1beta1" | "v1alpha3"),
        };
        version_ok.then_some(k)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Namespace => "Namespace",
            Kind::Service => "Service",
            Kind::Pod => "Pod",
            Kind::EndpointSlice => "EndpointSlice",
            Kind::Endpoints => "Endpoints",
            Kind::ServiceEntry => "ServiceEntry",
            Kind::WorkloadEntry => "WorkloadEntry",
            Kind::WorkloadGroup => "WorkloadGroup",
            Kind::VirtualService => "VirtualService",
            Kind::DestinationRule => "DestinationRule",
            Kind::Sidecar => "Sidecar",
            Kind::Gateway => "Gateway",
            Kind::Secret => "Secret",
            Kind::MeshConfig => "MeshConfig",
            Kind::PeerAuthentication => "PeerAuthentication",
            Kind::AuthorizationPolicy => "AuthorizationPolicy",
            Kind::RequestAuthentication => "RequestAuthentication",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Kinds whose changes only move endpoints: Istio pushes them as EDS (`full = false`).
    pub fn is_endpoint_only(self) -> bool {
        matches!(
            self,
            Kind::EndpointSlice
                | Kind::Endpoints
                | Kind::Pod
                | Kind::WorkloadEntry
                | Kind::WorkloadGroup
        )
    }

    /// Kinds that are not namespaced.
    pub fn is_cluster_scoped(self) -> bool {
        matches!(self, Kind::Namespace)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
