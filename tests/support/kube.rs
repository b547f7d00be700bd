//! Writing the test mesh through the Kubernetes API stand-in, as `kubectl apply` would.

use shoal_kube_test_server::TestApiServer;

/// The API resource an object of `kind` is created as.
fn resource_of(kind: &str) -> &'static str {
    match kind {
        "Namespace" => "namespaces",
        "Service" => "services",
        "Pod" => "pods",
        "EndpointSlice" => "endpointslices.discovery.k8s.io",
        "VirtualService" => "virtualservices.networking.istio.io",
        "DestinationRule" => "destinationrules.networking.istio.io",
        other => panic!("the test mesh has no {other}"),
    }
}

/// Creates (or replaces) every object of the YAML documents in `text` through the API.
pub fn apply_yaml(server: &TestApiServer, text: &str) {
    for doc in text.split("\n---") {
        if doc.trim().is_empty() {
            continue;
        }
        let object: serde_json::Value = serde_norway::from_str(doc).expect("test mesh YAML");
        let kind = object["kind"].as_str().expect("kind").to_string();
        server
            .apply(resource_of(&kind), object)
            .unwrap_or_else(|e| panic!("creating a {kind}: {e}"));
    }
}
