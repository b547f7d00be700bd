//! The mesh config the chart renders (ConfigMap `istio`, key `mesh`) from `meshConfig`.

use crate::chart::{NAMESPACE, every_values_file, render};

#[test]
fn mesh_config_values_render_the_configmap_ingest_reads() {
    for r in every_values_file() {
        assert!(
            r.of_kind("ConfigMap").next().is_none(),
            "{}: a mesh config without meshConfig values",
            r.values_file
        );
    }
    let r = render(
        "values.yaml",
        &[
            "meshConfig.rootNamespace=mesh-root",
            "meshConfig.outboundTrafficPolicy.mode=REGISTRY_ONLY",
            "meshConfig.accessLogFile=/dev/stdout",
        ],
    );
    let configmap = r.find("ConfigMap", "istio");
    assert_eq!(configmap["metadata"]["namespace"], NAMESPACE);
    // Read exactly as ingest reads it.
    let yaml = serde_norway::to_string(configmap).unwrap();
    let parsed = shoal_proto::config::parse::parse_documents("chart", &yaml);
    let [Ok(parsed)] = parsed.as_slice() else {
        panic!("{parsed:?}");
    };
    let shoal_proto::config::Spec::MeshConfig(mesh) = &parsed.config.spec else {
        panic!("not a mesh config: {:?}", parsed.config);
    };
    assert_eq!(mesh.root_namespace(), "mesh-root");
    assert!(mesh.registry_only());
}
