//! The Kubernetes API's JSON reads as the directory's YAML does: every object of the
//! repository's meshes, and Kubernetes objects as the API server writes them, served as
//! JSON items (without `apiVersion` and `kind`, as a built-in kind's list item is),
//! parse to the same config and warnings, or are rejected by the same name for the same
//! reason; and those accepted are read by serde_json alone (not the YAML fallback).

use super::doc::Doc;
use super::{Location, ParseError, Parsed, flow, parse_api_object, parse_documents, parse_object};
use serde_json::{Value, json};

const FILES: &[&str] = &[
    include_str!("../../../../examples/mesh/bookinfo/routing.yaml"),
    include_str!("../../../../examples/mesh/bookinfo/services.yaml"),
    include_str!("../../../../examples/mesh/istio-system/sidecar.yaml"),
    include_str!("../../../../tests/analyze/clean/mesh.yaml"),
    include_str!("../../../../tests/analyze/mesh/ingress.yaml"),
    include_str!("../../../../tests/analyze/mesh/security.yaml"),
    include_str!("../../../../tests/analyze/mesh/shop/routing.yaml"),
    include_str!("../../../../tests/analyze/mesh/shop/workloads.yaml"),
    include_str!("../../../../fuzz/corpus/config_parse/seed-gateway.yaml"),
];

const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

/// Kubernetes objects as the API server writes them, and some it would not.
fn api_objects() -> Vec<Value> {
    let b64 = |s: &str| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s)
    };
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": "shop", "labels": {"istio-injection": "enabled"},
                            "resourceVersion": "3", "uid": "u",
                            "creationTimestamp": "2026-01-01T00:00:00Z",
                            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:metadata": {}}}]},
               "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "reviews", "namespace": "shop"},
               "spec": {"selector": {"app": "reviews"}, "clusterIP": "10.0.0.1",
                        "ports": [{"name": "http", "port": 9080, "targetPort": 9080, "protocol": "TCP"},
                                  {"name": "grpc", "port": 7070, "targetPort": "grpc"}]},
               "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}, {"hostname": "lb"}]}}}),
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "reviews-1", "namespace": "shop", "labels": {"app": "reviews"}},
               "spec": {"serviceAccountName": "reviews", "nodeName": "node-1",
                        "containers": [{"name": "app", "image": "x",
                                        "ports": [{"name": "grpc", "containerPort": 7070}]}]},
               "status": {"podIP": "10.1.0.1", "phase": "Running",
                          "conditions": [{"type": "Ready", "status": "True"}]}}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "reviews-1", "namespace": "shop",
                            "labels": {"kubernetes.io/service-name": "reviews"}},
               "addressType": "IPv4", "ports": [{"name": "http", "port": 9080}],
               "endpoints": [{"addresses": ["10.1.0.1"], "conditions": {"ready": true},
                              "targetRef": {"kind": "Pod", "name": "reviews-1", "namespace": "shop"}}]}),
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
               "metadata": {"name": "cert", "namespace": "istio-system"},
               "data": {"tls.crt": b64(PEM), "tls.key": b64("-----BEGIN PRIVATE KEY-----\nx\n")}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": "shop"},
               "data": {"token": "YWJj"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "istio", "namespace": "istio-system"},
               "data": {"mesh": "rootNamespace: istio-system\ntrustDomain: example.org\n"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "other", "namespace": "istio-system"}, "data": {"a": "b"}}),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}}),
        // Rejected: a port that is not a number, a weight that is, a policy's kind.
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "bad", "namespace": "shop"},
               "spec": {"ports": [{"name": "http", "port": "eighty"}]}}),
        json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
               "metadata": {"name": "zero", "namespace": "shop"},
               "spec": {"hosts": ["reviews"], "http": [{"route": [
                   {"destination": {"host": "reviews", "subset": "v1"}, "weight": 0}]}]}}),
        json!({"apiVersion": "networking.istio.io/v1alpha3", "kind": "EnvoyFilter",
               "metadata": {"name": "f", "namespace": "shop"}, "spec": {}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "half", "namespace": "shop"},
               "data": {"tls.crt": b64(PEM)}}),
        // Not what an API server writes, but what YAML reads differently from JSON.
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "numbers", "namespace": "shop", "labels": {"version": 2}},
               "spec": {"selector": {"app": true}, "ports": [{"name": 80, "port": 80}]}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nulls", "namespace": "shop",
               "creationTimestamp": null}, "status": {"podIP": null}}),
    ]
}

/// The object of `doc` as the API serves it: its JSON, and its `apiVersion` and `kind`
/// (taken out, as a built-in kind's list item lacks them).
fn served(mut object: Value) -> (String, String, String) {
    let mut take = |field: &str| match object.as_object_mut().and_then(|o| o.remove(field)) {
        Some(Value::String(s)) => s,
        _ => String::new(),
    };
    let (api_version, kind) = (take("apiVersion"), take("kind"));
    (api_version, kind, object.to_string())
}

fn same(file: Result<Option<Parsed>, ParseError>, api: Result<Option<Parsed>, ParseError>) {
    match (file, api) {
        (Ok(None), Ok(None)) => {}
        (Ok(Some(file)), Ok(Some(api))) => {
            assert_eq!(file.config, api.config);
            assert_eq!(file.warnings, api.warnings, "{}", file.config.key());
        }
        (Err(file), Err(api)) => {
            assert_eq!((&file.object, &file.reason), (&api.object, &api.reason));
            assert_eq!(api.location.line, 1);
        }
        (file, api) => panic!("read differently: as a file {file:?}, from the API {api:?}"),
    }
}

fn check(object: Value) -> bool {
    let (api_version, kind, json) = served(object.clone());
    let api = parse_api_object("kubernetes/c1", (&api_version, &kind), &json);
    let location = Location {
        source: "kubernetes/c1".into(),
        line: 1,
    };
    let fast = parse_object(location, 0, Doc::Json(&json), Some((&api_version, &kind)));
    if let (Ok(accepted), Ok(fast)) = (&api, &fast) {
        assert_eq!(
            accepted.as_ref().map(|p| &p.config),
            fast.as_ref().map(|p| &p.config)
        );
    }
    // Accepted by serde_json alone, or not accepted at all (read again as YAML).
    let read_as_json = fast.is_ok() || api.is_err();
    let mut file = parse_documents("f.yaml", &object.to_string());
    assert!(file.len() <= 1, "{file:?}");
    same(file.pop().map_or(Ok(None), |r| r.map(Some)), api);
    read_as_json
}

#[test]
fn every_object_of_the_repositorys_meshes_reads_alike_from_the_api() {
    let mut read = 0;
    for text in FILES {
        for (_, doc) in super::split_documents(text) {
            let quoted = flow::quote_colon_scalars(doc);
            let object: Value = serde_norway::from_str(&quoted).expect("a YAML document");
            if object["kind"].as_str().is_some_and(|k| k.ends_with("List")) {
                continue;
            }
            assert!(check(object), "accepted, but not by serde_json: {doc}");
            read += 1;
        }
    }
    assert!(read > 30, "{read} objects");
}

#[test]
fn kubernetes_objects_read_alike_from_the_api_and_as_files() {
    let read_as_json: Vec<bool> = api_objects().into_iter().map(check).collect();
    // What the API server writes is read by serde_json alone; YAML also reads numbers,
    // booleans and nulls where strings are due (the last two objects), which the API
    // server never writes.
    let (api_server, others) = read_as_json.split_at(read_as_json.len() - 2);
    assert!(api_server.iter().all(|j| *j), "{read_as_json:?}");
    assert!(others.iter().all(|j| !*j), "{read_as_json:?}");
}
