use super::*;

#[test]
fn kubectl_spelling_parses_into_group_and_plural() {
    assert_eq!(
        GroupResource::from("services"),
        GroupResource::new("", "services")
    );
    assert_eq!(
        GroupResource::from("virtualservices.networking.istio.io"),
        GroupResource::new("networking.istio.io", "virtualservices")
    );
    assert_eq!(
        GroupResource::new("discovery.k8s.io", "endpointslices").to_string(),
        "endpointslices.discovery.k8s.io"
    );
}

#[test]
fn istio_kinds_are_served_under_three_versions_and_core_under_v1() {
    let registry = shoal_resources();
    for version in ["v1", "v1beta1", "v1alpha3"] {
        let served = registry.served("networking.istio.io", version, "virtualservices");
        assert_eq!(served.map(|r| r.kind.as_str()), Some("VirtualService"));
    }
    assert!(
        registry
            .served("networking.istio.io", "v2", "virtualservices")
            .is_none()
    );
    let services = registry.served("", "v1", "services").unwrap();
    assert_eq!(services.api_version("v1"), "v1");
    assert!(services.namespaced);
    assert!(!registry.served("", "v1", "nodes").unwrap().namespaced);
    let slices = registry
        .served("discovery.k8s.io", "v1", "endpointslices")
        .unwrap();
    assert_eq!(slices.api_version("v1"), "discovery.k8s.io/v1");
}

#[test]
fn istio_security_kinds_are_served_under_v1_and_v1beta1() {
    let registry = shoal_resources();
    for (plural, kind) in [
        ("authorizationpolicies", "AuthorizationPolicy"),
        ("peerauthentications", "PeerAuthentication"),
        ("requestauthentications", "RequestAuthentication"),
    ] {
        for version in ["v1", "v1beta1"] {
            let served = registry
                .served("security.istio.io", version, plural)
                .unwrap();
            assert_eq!(served.kind, kind);
            assert!(served.namespaced);
            assert_eq!(
                served.api_version(version),
                format!("security.istio.io/{version}")
            );
        }
        assert!(
            registry
                .served("security.istio.io", "v1alpha1", plural)
                .is_none()
        );
    }
}
