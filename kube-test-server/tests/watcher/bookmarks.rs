//! BOOKMARK events: sent at the configured interval, and taken by the watcher as its
//! resume point.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{WatchEvent, WatchParams};
use kube::runtime::watcher;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn bookmarks_carry_the_current_global_version() {
    let server = server().await;
    server.create("services", service("a", "s1", "x")).unwrap();
    server
        .create("pods", json!({"metadata": {"namespace": "a", "name": "p"}}))
        .unwrap();
    let api: Api<Service> = Api::all(client(&server).await);
    let params = WatchParams::default();
    let mut stream = api.watch(&params, "1").await.unwrap().boxed();
    let event = tokio::time::timeout(Duration::from_secs(1), stream.next()).await;
    match event.unwrap().unwrap().unwrap() {
        WatchEvent::Bookmark(bookmark) => {
            // Version 2 is the pod's: bookmarks advance with every resource's writes.
            assert_eq!(bookmark.metadata.resource_version, "2");
            assert_eq!(bookmark.types.kind, "Service");
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn the_watcher_resumes_from_its_last_bookmark() {
    let server = server().await;
    server.create("services", service("a", "s1", "x")).unwrap();
    let api = Api::all(client(&server).await);
    let mut events = watch_services(api, watcher::Config::default());
    assert_eq!(take(&mut events, 3).await.last().unwrap(), "InitDone");
    server.create("services", service("a", "s2", "x")).unwrap();
    assert_eq!(next(&mut events).await, "Apply a/s2");

    // Writes to another resource move the global version past the watcher's last event;
    // only bookmarks tell the watcher. After a compaction, a resume from the last event's
    // version would get 410 and relist; one from the last bookmark goes on.
    for name in ["p1", "p2", "p3"] {
        let pod = json!({"metadata": {"namespace": "a", "name": name}});
        server.create("pods", pod).unwrap();
    }
    assert_quiet(&mut events).await; // polled for 200 ms: several bookmarks are taken
    server.compact();
    server.drop_watches();
    server.create("services", service("a", "s3", "x")).unwrap();
    assert_eq!(next(&mut events).await, "Apply a/s3");
}

#[tokio::test]
async fn the_bookmark_interval_can_change() {
    let server = server().await;
    server.set_bookmark_interval(Duration::from_secs(3600));
    let api: Api<Service> = Api::all(client(&server).await);
    let params = WatchParams::default();
    let mut stream = api.watch(&params, "0").await.unwrap().boxed();
    let quiet = tokio::time::timeout(Duration::from_millis(200), stream.next()).await;
    assert!(
        quiet.is_err(),
        "no bookmark expected within an hour's interval"
    );
}
