//! What the Kubernetes source watches: every kind Shoal reads, as the API server serves
//! it (group, version, plural). Istio's kinds are watched at `v1` (`networking.istio.io`,
//! `security.istio.io`), which the API server serves for every stored version.

use kube::api::{ApiResource, GroupVersionKind};

/// One watched kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watched {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub scope: Scope,
}

/// Where a kind is watched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Cluster-wide objects.
    Cluster,
    /// In the namespaces the source is limited to (all, without a limit).
    Namespaced,
    /// In the system namespace only, whatever the limit (the mesh config, as istiod
    /// reads it); not at all on a cluster whose mesh config is not read.
    System,
}

impl Watched {
    pub fn api_resource(&self) -> ApiResource {
        let gvk = GroupVersionKind::gvk(self.group, self.version, self.kind);
        ApiResource::from_gvk_with_plural(&gvk, self.plural)
    }
}

const fn kind(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    scope: Scope,
) -> Watched {
    Watched {
        group,
        version,
        kind,
        plural,
        scope,
    }
}

/// The kinds the source watches, in the order their first lists are loaded. Nodes are
/// read for their Pods' localities only (`shoal_proto::config::topology`); every other kind is config.
pub const WATCHED: &[Watched] = &[
    kind("", "v1", "Namespace", "namespaces", Scope::Cluster),
    kind("", "v1", "Node", "nodes", Scope::Cluster),
    kind("", "v1", "Service", "services", Scope::Namespaced),
    kind("", "v1", "Pod", "pods", Scope::Namespaced),
    kind(
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        "endpointslices",
        Scope::Namespaced,
    ),
    kind(
        "networking.istio.io",
        "v1",
        "ServiceEntry",
        "serviceentries",
        Scope::Namespaced,
    ),
    kind(
        "networking.istio.io",
        "v1",
        "WorkloadEntry",
        "workloadentries",
        Scope::Namespaced,
    ),
    kind(
        "networking.istio.io",
        "v1",
        "WorkloadGroup",
        "workloadgroups",
        Scope::Namespaced,
    ),
    kind(
        "networking.istio.io",
        "v1",
        "VirtualService",
        "virtualservices",
        Scope::Namespaced,
    ),
    kind(
        "networking.istio.io",
        "v1",
        "DestinationRule",
        "destinationrules",
        Scope::Namespaced,
    ),
    kind(
        "networking.istio.io",
        "v1",
        "Sidecar",
        "sidecars",
        Scope::Namespaced,
    ),
    kind(
        "networking.istio.io",
        "v1",
        "Gateway",
        "gateways",
        Scope::Namespaced,
    ),
    // Security policies, read, validated and enforced (what of one Shoal cannot
    // express fails closed and is warned about).
    kind(
        "security.istio.io",
        "v1",
        "AuthorizationPolicy",
        "authorizationpolicies",
        Scope::Namespaced,
    ),
    kind(
        "security.istio.io",
        "v1",
        "PeerAuthentication",
        "peerauthentications",
        Scope::Namespaced,
    ),
    kind(
        "security.istio.io",
        "v1",
        "RequestAuthentication",
        "requestauthentications",
        Scope::Namespaced,
    ),
    // Gateways' TLS credentials (`credentialName`), as istiod reads them: every
    // Secret is listed, only those with TLS material are kept.
    kind("", "v1", "Secret", "secrets", Scope::Namespaced),
    // The mesh config, as istiod reads it: ConfigMaps of the system namespace only
    // (the parser keeps `istio` and `istio-<revision>` with a `mesh` key).
    kind("", "v1", "ConfigMap", "configmaps", Scope::System),
];

/// Kinds Shoal does not implement, watched only so that their objects are reported as
/// unsupported (the log, `shoal_ingest_config_rejected{kind="other"}`,
/// `/debug/rejections`), above all EnvoyFilters, whose patches are not applied. A kind
/// whose CRD is not installed is simply not watched.
pub const REPORTED: &[Watched] = &[
    kind(
        "telemetry.istio.io",
        "v1",
        "Telemetry",
        "telemetries",
        Scope::Namespaced,
    ),
    kind(
        "networking.istio.io",
        "v1alpha3",
        "EnvoyFilter",
        "envoyfilters",
        Scope::Namespaced,
    ),
    kind(
        "extensions.istio.io",
        "v1alpha1",
        "WasmPlugin",
        "wasmplugins",
        Scope::Namespaced,
    ),
    kind(
        "gateway.networking.k8s.io",
        "v1",
        "Gateway",
        "gateways",
        Scope::Namespaced,
    ),
    kind(
        "gateway.networking.k8s.io",
        "v1",
        "HTTPRoute",
        "httproutes",
        Scope::Namespaced,
    ),
    kind(
        "gateway.networking.k8s.io",
        "v1",
        "GRPCRoute",
        "grpcroutes",
        Scope::Namespaced,
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::config::Kind;

    #[test]
    fn every_watched_kind_is_one_shoal_reads() {
        for w in WATCHED.iter().filter(|w| w.kind != "Node") {
            let api_version = match w.group {
                "" => w.version.to_string(),
                group => format!("{group}/{}", w.version),
            };
            assert!(
                Kind::from_api(&api_version, w.kind).is_some(),
                "{api_version} {}",
                w.kind
            );
            assert_eq!(w.api_resource().api_version, api_version);
        }
    }

    #[test]
    fn every_reported_kind_is_reported_as_unsupported_by_the_parser() {
        for w in REPORTED {
            let api_version = format!("{}/{}", w.group, w.version);
            let doc = format!(
                "apiVersion: {api_version}\nkind: {}\nmetadata: {{name: x, namespace: shop}}\nspec: {{}}\n",
                w.kind
            );
            let parsed = shoal_proto::config::parse::parse_documents("k", &doc);
            assert!(
                matches!(parsed.as_slice(), [Err(e)] if e.reason.starts_with("unsupported by Shoal")),
                "{api_version} {}: {parsed:?}",
                w.kind
            );
        }
    }

    #[test]
    fn security_kinds_are_watched_as_config() {
        for kind in [
            "AuthorizationPolicy",
            "PeerAuthentication",
            "RequestAuthentication",
        ] {
            let w = WATCHED
                .iter()
                .find(|w| w.kind == kind)
                .unwrap_or_else(|| panic!("{kind} is not watched"));
            assert_eq!((w.group, w.version), ("security.istio.io", "v1"));
            assert!(REPORTED.iter().all(|r| r.kind != kind), "{kind}");
            let doc = format!(
                "apiVersion: security.istio.io/v1\nkind: {kind}\nmetadata: {{name: x, namespace: shop}}\nspec: {{}}\n"
            );
            let parsed = shoal_proto::config::parse::parse_documents("k", &doc);
            assert!(matches!(parsed.as_slice(), [Ok(_)]), "{kind}: {parsed:?}");
        }
    }
}
