//! Istio kinds as `DynamicObject`s through an `ApiResource` (no discovery), served under
//! each of their versions.

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::json;

use crate::support::*;

fn virtual_services(client: Client, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("networking.istio.io", version, "VirtualService");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "virtualservices");
    Api::namespaced_with(client, "prod", &resource)
}

#[tokio::test]
async fn a_virtual_service_is_watched_as_v1_and_seen_as_v1beta1() {
    let server = server().await;
    let client = client(&server).await;
    let v1 = virtual_services(client.clone(), "v1");
    let v1beta1 = virtual_services(client.clone(), "v1beta1");
    let v1alpha3 = virtual_services(client, "v1alpha3");
    let mut events = watcher::watcher(v1.clone(), watcher::Config::default()).boxed();
    assert_eq!(take(&mut events, 2).await, ["Init", "InitDone"]);

    // Created over HTTP as v1alpha3 by the kube client itself.
    let reviews: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "VirtualService",
        "metadata": {"name": "reviews", "namespace": "prod"},
        "spec": {"hosts": ["reviews"], "http": [{"route": [{"destination": {"host": "reviews"}}]}]},
    }))
    .unwrap();
    v1alpha3
        .create(&PostParams::default(), &reviews)
        .await
        .unwrap();

    let event = tokio::time::timeout(std::time::Duration::from_secs(3), events.next()).await;
    let Ok(watcher::Event::Apply(seen)) = event.unwrap().unwrap() else {
        panic!("expected an Apply event");
    };
    let types = seen.types.clone().unwrap();
    assert_eq!(types.api_version, "networking.istio.io/v1");
    assert_eq!(types.kind, "VirtualService");
    assert_eq!(seen.data["spec"]["hosts"], json!(["reviews"]));

    let same = v1beta1.get("reviews").await.unwrap();
    assert_eq!(
        same.types.unwrap().api_version,
        "networking.istio.io/v1beta1"
    );
    assert_eq!(same.metadata.uid, seen.metadata.uid);
    assert_eq!(
        same.metadata.resource_version,
        seen.metadata.resource_version
    );

    let listed = v1beta1.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].metadata.name.as_deref(), Some("reviews"));
}

#[tokio::test]
async fn a_registered_kind_is_served() {
    let server = server().await;
    server.register(shoal_kube_test_server::ResourceType::grouped(
        "gateway.networking.k8s.io",
        &["v1"],
        "httproutes",
        "HTTPRoute",
        true,
    ));
    let route = json!({"metadata": {"namespace": "prod", "name": "r"}});
    server
        .create("httproutes.gateway.networking.k8s.io", route)
        .unwrap();
    let gvk = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "httproutes");
    let api: Api<DynamicObject> = Api::all_with(client(&server).await, &resource);
    let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
    assert_eq!(
        take(&mut events, 3).await,
        ["Init", "InitApply prod/r", "InitDone"]
    );
}
