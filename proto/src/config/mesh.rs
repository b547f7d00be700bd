//! Istio's MeshConfig, as istiod reads it from the ConfigMap `istio` (key `mesh`) in the
//! system namespace: only the fields Shoal acts on. Istio has hundreds more; they are
//! accepted and ignored, as a mesh config written for istiod must load unchanged.

use super::extension_provider::ExtensionProvider;
use crate::model::ROOT_NAMESPACE;
use serde::{Deserialize, Serialize};

/// Istio's default trust domain.
pub const DEFAULT_TRUST_DOMAIN: &str = "cluster.local";

/// The name of the ConfigMap holding the mesh config (`istio-<revision>` for a revision).
pub const MESH_CONFIGMAP: &str = "istio";

/// Whether a ConfigMap of this name can hold a mesh config: `istio` or `istio-<revision>`
/// (Istio's other ConfigMaps, `istio-ca-root-cert` or `istio-sidecar-injector`, share the
/// prefix: only those with a `mesh` key are read).
pub fn is_mesh_configmap(name: &str) -> bool {
    name == MESH_CONFIGMAP
        || name
            .strip_prefix("istio-")
            .is_some_and(|rev| !rev.is_empty())
}

/// The mesh-wide settings Shoal honours. Empty fields are unset: Istio's defaults apply.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MeshConfig {
    /// The namespace whose Sidecar (and DestinationRules) apply mesh-wide.
    pub root_namespace: String,
    /// `exportTo` of Services and ServiceEntries that set none.
    pub default_service_export_to: Vec<String>,
    /// `exportTo` of VirtualServices that set none.
    pub default_virtual_service_export_to: Vec<String>,
    /// `exportTo` of DestinationRules that set none.
    pub default_destination_rule_export_to: Vec<String>,
    pub outbound_traffic_policy: Option<MeshOutboundTrafficPolicy>,
    /// The mesh's trust domain: workload SPIFFE IDs are `spiffe://<it>/ns/<ns>/sa/<sa>`
    /// (Istio's default `cluster.local`; the edges' `--trust-domain` must agree).
    pub trust_domain: String,
    /// Istio's `enableAutoMtls` (default on): sidecars speak mTLS to workloads that
    /// have a sidecar, plaintext to the others, without a DestinationRule.
    pub enable_auto_mtls: Option<bool>,
    /// External authorizers for AuthorizationPolicies with `action: CUSTOM`.
    pub extension_providers: Vec<ExtensionProvider>,
}

/// `outboundTrafficPolicy`: what sidecars do with traffic to hosts outside the registry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MeshOutboundTrafficPolicy {
    /// `ALLOW_ANY` (Istio's default) or `REGISTRY_ONLY`.
    pub mode: String,
}

impl MeshConfig {
    /// The root namespace: the configured one, else Istio's default (`istio-system`).
    pub fn root_namespace(&self) -> &str {
        if self.root_namespace.is_empty() {
            ROOT_NAMESPACE
        } else {
            &self.root_namespace
        }
    }

    /// The trust domain: the configured one, else Istio's default (`cluster.local`).
    pub fn trust_domain(&self) -> &str {
        if self.trust_domain.is_empty() {
            DEFAULT_TRUST_DOMAIN
        } else {
            &self.trust_domain
        }
    }

    /// Whether auto mTLS is on (Istio's default).
    pub fn auto_mtls(&self) -> bool {
        self.enable_auto_mtls.unwrap_or(true)
    }

    /// Whether the mesh-wide outbound policy is `REGISTRY_ONLY` (else `ALLOW_ANY`).
    pub fn registry_only(&self) -> bool {
        self.outbound_traffic_policy
            .as_ref()
            .is_some_and(|p| p.mode == "REGISTRY_ONLY")
    }

    /// Istio's MeshConfig validation of the fields Shoal reads: the reason the first
    /// invalid one is rejected, naming it.
    pub fn validate(&self) -> Result<(), String> {
        if !self.root_namespace.is_empty() && !is_dns_label(&self.root_namespace) {
            return Err(format!(
                "rootNamespace {:?}: not a valid namespace name",
                self.root_namespace
            ));
        }
        for (field, list) in [
            ("defaultServiceExportTo", &self.default_service_export_to),
            (
                "defaultVirtualServiceExportTo",
                &self.default_virtual_service_export_to,
            ),
            (
                "defaultDestinationRuleExportTo",
                &self.default_destination_rule_export_to,
            ),
        ] {
            export_to(list).map_err(|reason| format!("{field}: {reason}"))?;
        }
        if let Some(policy) = &self.outbound_traffic_policy {
            match policy.mode.as_str() {
                "" | "ALLOW_ANY" | "REGISTRY_ONLY" => {}
                other => {
                    return Err(format!(
                        "outboundTrafficPolicy.mode {other:?}: must be ALLOW_ANY or REGISTRY_ONLY"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Istio's `exportTo` rules: `.`, `*`, `~` or a namespace name, without duplicates;
/// `*` and `~` stand alone.
fn export_to(list: &[String]) -> Result<(), String> {
    for (i, entry) in list.iter().enumerate() {
        let valid = matches!(entry.as_str(), "." | "*" | "~") || is_dns_label(entry);
        if !valid {
            return Err(format!("{entry:?}: not '.', '*', '~' or a namespace name"));
        }
        if list[..i].contains(entry) {
            return Err(format!("{entry:?} is listed twice"));
        }
    }
    for alone in ["*", "~"] {
        if list.len() > 1 && list.iter().any(|e| e == alone) {
            return Err(format!("{alone:?} cannot be combined with other entries"));
        }
    }
    Ok(())
}

/// A DNS-1123 label, as Kubernetes names namespaces.
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_namespace_defaults_to_istio_system() {
        assert_eq!(MeshConfig::default().root_namespace(), "istio-system");
        let mesh = MeshConfig {
            root_namespace: "mesh-root".into(),
            ..Default::default()
        };
        assert_eq!(mesh.root_namespace(), "mesh-root");
    }

    #[test]
    fn configmap_names() {
        assert!(is_mesh_configmap("istio"));
        assert!(is_mesh_configmap("istio-canary"));
        assert!(!is_mesh_configmap("istio-"));
        assert!(!is_mesh_configmap("kube-root-ca.crt"));
    }

    #[test]
    fn invalid_values_are_rejected_with_the_field() {
        let bad = |mesh: MeshConfig| mesh.validate().unwrap_err();
        let reason = bad(MeshConfig {
            root_namespace: "Not_A_Namespace".into(),
            ..Default::default()
        });
        assert!(reason.starts_with("rootNamespace"), "{reason}");
        let reason = bad(MeshConfig {
            default_service_export_to: vec!["*".into(), ".".into()],
            ..Default::default()
        });
        assert!(reason.starts_with("defaultServiceExportTo"), "{reason}");
        let reason = bad(MeshConfig {
            default_destination_rule_export_to: vec!["a/b".into()],
            ..Default::default()
        });
        assert!(
            reason.starts_with("defaultDestinationRuleExportTo"),
            "{reason}"
        );
        let reason = bad(MeshConfig {
            outbound_traffic_policy: Some(MeshOutboundTrafficPolicy {
                mode: "DENY".into(),
            }),
            ..Default::default()
        });
        assert!(reason.contains("ALLOW_ANY or REGISTRY_ONLY"), "{reason}");
        let good = MeshConfig {
            default_virtual_service_export_to: vec![".".into(), "shared".into()],
            ..Default::default()
        };
        assert_eq!(good.validate(), Ok(()));
    }
}
