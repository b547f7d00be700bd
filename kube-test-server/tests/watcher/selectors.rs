//! A namespaced Api with a label selector: only matching objects of that namespace, and
//! objects entering or leaving the selection as Apply and Delete.

use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::runtime::watcher;

use crate::support::*;

#[tokio::test]
async fn a_namespaced_labelled_watch_sees_only_its_selection() {
    let server = server().await;
    server
        .create("services", service("a", "web1", "web"))
        .unwrap();
    server.create("services", service("a", "db", "db")).unwrap();
    server
        .create("services", service("b", "web2", "web"))
        .unwrap();
    let api: Api<Service> = Api::namespaced(client(&server).await, "a");
    let config = watcher::Config::default()
        .labels("app in (web,api)")
        .page_size(1);
    let mut events = watch_services(api, config);
    assert_eq!(
        take(&mut events, 3).await,
        ["Init", "InitApply a/web1", "InitDone"]
    );

    server
        .create("services", service("b", "web3", "web"))
        .unwrap(); // other namespace
    server
        .create("services", service("a", "db2", "db"))
        .unwrap(); // not selected
    server.apply("services", service("a", "db", "api")).unwrap(); // enters the selection
    server
        .apply("services", service("a", "web1", "db"))
        .unwrap(); // leaves it
    server.delete("services", "a", "db2").unwrap(); // never selected
    server
        .create("services", service("a", "web4", "web"))
        .unwrap();
    let seen = take(&mut events, 3).await;
    assert_eq!(seen, ["Apply a/db", "Delete a/web1", "Apply a/web4"]);
    assert_quiet(&mut events).await;
}

#[tokio::test]
async fn field_selectors_pick_by_name() {
    let server = server().await;
    server.create("services", service("a", "one", "x")).unwrap();
    server.create("services", service("a", "two", "x")).unwrap();
    let api: Api<Service> = Api::all(client(&server).await);
    let config = watcher::Config::default().fields("metadata.name=two");
    let mut events = watch_services(api, config);
    assert_eq!(
        take(&mut events, 3).await,
        ["Init", "InitApply a/two", "InitDone"]
    );
}
