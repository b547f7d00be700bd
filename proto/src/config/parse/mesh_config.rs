//! The mesh config in a ConfigMap: its `data.mesh` key holds MeshConfig YAML, as istiod
//! reads it. Unknown MeshConfig fields are ignored; a known one of the wrong type, or an
//! invalid value, rejects the ConfigMap with the field named.

use super::super::mesh::MeshConfig;
use super::doc::{DecodeError, Doc};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Default, Deserialize)]
#[serde(default)]
struct RawConfigMap {
    data: BTreeMap<String, String>,
}

/// The mesh config of the ConfigMap in `doc`; `None` when it has no `mesh` key (a
/// ConfigMap that only shares the name prefix).
pub fn mesh_config(doc: Doc<'_>) -> Result<Option<MeshConfig>, DecodeError> {
    let raw: RawConfigMap = doc.decode()?;
    let Some(text) = raw.data.get("mesh") else {
        return Ok(None);
    };
    let mesh: MeshConfig = if text.trim().is_empty() {
        MeshConfig::default()
    } else {
        serde_norway::from_str::<Option<MeshConfig>>(text)
            .map_err(|e| DecodeError::custom(format!("data.mesh: {}", DecodeError::from(e))))?
            .unwrap_or_default()
    };
    mesh.validate()
        .map_err(|reason| DecodeError::custom(format!("data.mesh: {reason}")))?;
    Ok(Some(mesh))
}

#[cfg(test)]
mod tests {
    use crate::config::mesh::MeshConfig;
    use crate::config::parse::parse_documents;
    use crate::config::{Kind, Spec};

    fn configmap(name: &str, data: &str) -> String {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: istio-system\ndata:\n{data}"
        )
    }

    fn mesh_of(yaml: &str) -> MeshConfig {
        let mut out = parse_documents("cm.yaml", yaml);
        assert_eq!(out.len(), 1, "{out:?}");
        let parsed = out.remove(0).expect("accepted");
        assert_eq!(parsed.config.kind(), Kind::MeshConfig);
        let Spec::MeshConfig(mesh) = parsed.config.spec else {
            unreachable!()
        };
        mesh
    }

    #[test]
    fn istio_configmap_reads_the_fields_shoal_acts_on_and_ignores_the_rest() {
        let yaml = configmap(
            "istio",
            "  mesh: |-\n    rootNamespace: mesh-root\n    defaultServiceExportTo: [\".\"]\n    defaultVirtualServiceExportTo: [\"*\"]\n    defaultDestinationRuleExportTo: [\"~\"]\n    outboundTrafficPolicy:\n      mode: REGISTRY_ONLY\n    accessLogFile: /dev/stdout\n    defaultConfig:\n      discoveryAddress: istiod:15012\n      holdApplicationUntilProxyStarts: true\n    enableTracing: false\n  meshNetworks: 'networks: {}'\n",
        );
        let mesh = mesh_of(&yaml);
        assert_eq!(mesh.root_namespace(), "mesh-root");
        assert_eq!(mesh.default_service_export_to, ["."]);
        assert_eq!(mesh.default_virtual_service_export_to, ["*"]);
        assert_eq!(mesh.default_destination_rule_export_to, ["~"]);
        assert!(mesh.registry_only());
        // A revision's mesh config, and an empty one (Istio's defaults).
        let empty = mesh_of(&configmap("istio-canary", "  mesh: ''\n"));
        assert_eq!(empty, MeshConfig::default());
    }

    #[test]
    fn other_configmaps_are_not_read() {
        for yaml in [
            configmap("kube-root-ca.crt", "  ca.crt: x\n"),
            configmap("istio-ca-root-cert", "  root-cert.pem: x\n"),
            configmap("istio-sidecar-injector", "  config: x\n  values: y\n"),
            configmap("my-app", "  mesh: 'rootNamespace: x'\n"),
        ] {
            assert!(parse_documents("cm.yaml", &yaml).is_empty(), "{yaml}");
        }
    }

    #[test]
    fn invalid_mesh_config_is_rejected_naming_the_object_and_field() {
        for (mesh, field) in [
            (
                "outboundTrafficPolicy: {mode: DENY_ALL}",
                "outboundTrafficPolicy.mode",
            ),
            (
                "defaultServiceExportTo: ['*', 'shop']",
                "defaultServiceExportTo",
            ),
            ("rootNamespace: [a, b]", "rootNamespace"),
            ("rootNamespace: Bad_Name", "rootNamespace"),
            (
                "defaultDestinationRuleExportTo: 'shop'",
                "defaultDestinationRuleExportTo",
            ),
        ] {
            let yaml = configmap("istio", &format!("  mesh: \"{mesh}\"\n"));
            let mut out = parse_documents("cm.yaml", &yaml);
            let error = out.remove(0).expect_err(mesh);
            assert_eq!(error.object, "MeshConfig istio-system/istio");
            assert!(error.reason.contains(field), "{mesh}: {}", error.reason);
        }
    }
}
