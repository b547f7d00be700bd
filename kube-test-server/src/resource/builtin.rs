//! The resource types Shoal's Kubernetes registry reads, registered on every server.

use super::{Registry, ResourceType};

/// Istio serves its networking CRDs under all three versions (one storage version).
const ISTIO_NETWORKING_VERSIONS: &[&str] = &["v1", "v1beta1", "v1alpha3"];
/// ... and its security CRDs under two.
const ISTIO_SECURITY_VERSIONS: &[&str] = &["v1", "v1beta1"];

/// Core Namespace, Service, Pod, Node, Secret, ConfigMap; discovery.k8s.io/v1
/// EndpointSlice; Istio's networking.istio.io kinds in v1, v1beta1 and v1alpha3; and
/// its security.istio.io kinds in v1 and v1beta1.
pub fn shoal_resources() -> Registry {
    let mut registry = Registry::default();
    registry.register(ResourceType::core("namespaces", "Namespace", false));
    registry.register(ResourceType::core("services", "Service", true));
    registry.register(ResourceType::core("pods", "Pod", true));
    registry.register(ResourceType::core("nodes", "Node", false));
    registry.register(ResourceType::core("secrets", "Secret", true));
    registry.register(ResourceType::core("configmaps", "ConfigMap", true));
    registry.register(ResourceType::built_in(
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        true,
    ));
    for (plural, kind) in [
        ("virtualservices", "VirtualService"),
        ("destinationrules", "DestinationRule"),
        ("gateways", "Gateway"),
        ("serviceentries", "ServiceEntry"),
        ("workloadentries", "WorkloadEntry"),
        ("workloadgroups", "WorkloadGroup"),
        ("sidecars", "Sidecar"),
    ] {
        registry.register(ResourceType::grouped(
            "networking.istio.io",
            ISTIO_NETWORKING_VERSIONS,
            plural,
            kind,
            true,
        ));
    }
    for (plural, kind) in [
        ("authorizationpolicies", "AuthorizationPolicy"),
        ("peerauthentications", "PeerAuthentication"),
        ("requestauthentications", "RequestAuthentication"),
    ] {
        registry.register(ResourceType::grouped(
            "security.istio.io",
            ISTIO_SECURITY_VERSIONS,
            plural,
            kind,
            true,
        ));
    }
    registry
}
