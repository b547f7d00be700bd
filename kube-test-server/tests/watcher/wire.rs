//! The raw wire format where the watcher alone would not show it: error bodies and the
//! 410 ERROR event.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

async fn get(url: String) -> (u16, String) {
    let response = reqwest::get(url).await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn an_unknown_resource_is_a_404_status() {
    let server = server().await;
    for path in [
        "/apis/example.com/v1/widgets",
        "/api/v1/namespaces/a/nodes",
        "/api/v2/pods",
    ] {
        let (code, body) = get(format!("{}{path}", server.url())).await;
        assert_eq!(code, 404, "{path}");
        let status: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(status["code"], 404);
    }
}

#[tokio::test]
async fn a_watch_from_a_compacted_version_is_one_410_error_event() {
    let server = server().await;
    server.create("services", service("a", "s1", "x")).unwrap();
    server.create("services", service("a", "s2", "x")).unwrap();
    server.compact();
    let url = format!("{}/api/v1/services?watch=1&resourceVersion=1", server.url());
    let watch = tokio::time::timeout(Duration::from_secs(2), get(url));
    let (code, body) = watch.await.expect("the stream must end after the error");
    assert_eq!(code, 200);
    let lines: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let expected = json!({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "too old resource version: 1 (2)", "reason": "Expired", "code": 410,
    }});
    assert_eq!(lines, [expected]);
}

#[tokio::test]
async fn a_watch_ends_after_its_timeout_and_lists_are_typed() {
    let server = server().await;
    server.create("services", service("a", "s1", "x")).unwrap();
    let url = format!(
        "{}/api/v1/namespaces/a/services?watch=true&timeoutSeconds=1",
        server.url()
    );
    let (code, body) = tokio::time::timeout(Duration::from_secs(3), get(url))
        .await
        .unwrap();
    assert_eq!(code, 200);
    let event: Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["metadata"]["name"], "s1");

    let (code, body) = get(format!("{}/api/v1/services?limit=5", server.url())).await;
    assert_eq!(code, 200);
    let list: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["kind"], "ServiceList");
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(list["metadata"]["resourceVersion"], "1");
    assert_eq!(list["items"][0]["metadata"]["name"], "s1");
}

/// As kube-apiserver: a built-in kind's list items carry no `apiVersion`/`kind`, a custom
/// resource's do; a watch event's object and a GET always do.
#[tokio::test]
async fn list_items_are_typed_as_the_real_api_server_types_them() {
    let server = server().await;
    server.create("services", service("a", "s1", "x")).unwrap();
    let vs = json!({"metadata": {"namespace": "a", "name": "r"}, "spec": {"hosts": ["r"]}});
    server
        .create("virtualservices.networking.istio.io", vs)
        .unwrap();

    let (_, body) = get(format!("{}/api/v1/services", server.url())).await;
    let list: Value = serde_json::from_str(&body).unwrap();
    let item = list["items"][0].as_object().unwrap();
    assert!(
        !item.contains_key("apiVersion") && !item.contains_key("kind"),
        "{item:?}"
    );

    let url = format!(
        "{}/apis/networking.istio.io/v1beta1/virtualservices",
        server.url()
    );
    let list: Value = serde_json::from_str(&get(url).await.1).unwrap();
    assert_eq!(
        list["items"][0]["apiVersion"],
        "networking.istio.io/v1beta1"
    );
    assert_eq!(list["items"][0]["kind"], "VirtualService");

    let (_, body) = get(format!("{}/api/v1/namespaces/a/services/s1", server.url())).await;
    let one: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (&one["apiVersion"], &one["kind"]),
        (&json!("v1"), &json!("Service"))
    );

    let url = format!("{}/api/v1/services?watch=1&timeoutSeconds=1", server.url());
    let (_, body) = tokio::time::timeout(Duration::from_secs(3), get(url))
        .await
        .unwrap();
    let event: Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
    assert_eq!(event["object"]["kind"], "Service");
    assert_eq!(event["object"]["apiVersion"], "v1");
}

#[tokio::test]
async fn an_empty_list_is_an_empty_array_or_null_as_configured() {
    let server = server().await;
    let (_, body) = get(format!("{}/api/v1/pods", server.url())).await;
    let list: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["items"], json!([]));

    let server =
        shoal_kube_test_server::TestApiServer::start_with(shoal_kube_test_server::Settings {
            null_empty_lists: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let (_, body) = get(format!("{}/api/v1/pods", server.url())).await;
    let list: Value = serde_json::from_str(&body).unwrap();
    assert!(list.as_object().unwrap().contains_key("items"), "{list}");
    assert_eq!(list["items"], Value::Null);
}
