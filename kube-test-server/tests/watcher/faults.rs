//! Dropped watches, compaction and a server restart: the watcher recovers from each with
//! nothing missed and nothing repeated.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};

use crate::support::*;

#[tokio::test]
async fn a_dropped_watch_resumes_from_its_last_version() {
    let server = server().await;
    server
        .create("services", service("a", "keep", "x"))
        .unwrap();
    server
        .create("services", service("a", "gone", "x"))
        .unwrap();
    let api = Api::all(client(&server).await);
    let mut events = watch_services(api, watcher::Config::default());
    assert_eq!(take(&mut events, 4).await.last().unwrap(), "InitDone");
    server
        .create("services", service("a", "first", "x"))
        .unwrap();
    assert_eq!(next(&mut events).await, "Apply a/first");

    // The watcher is not polled while its watch is dropped and these changes are made,
    // so it reconnects after all of them, from the version of `first`.
    server.drop_watches();
    server.create("services", service("a", "new", "x")).unwrap();
    server.apply("services", service("a", "keep", "y")).unwrap();
    server.delete("services", "a", "gone").unwrap();
    let resumed = take(&mut events, 3).await;
    assert_eq!(resumed, ["Apply a/new", "Apply a/keep", "Delete a/gone"]);

    server
        .create("services", service("a", "after", "x"))
        .unwrap();
    assert_eq!(next(&mut events).await, "Apply a/after");
    assert_quiet(&mut events).await;
}

#[tokio::test]
async fn a_compacted_history_makes_the_watcher_relist_to_the_exact_state() {
    let server = server().await;
    for name in ["s1", "s2", "s3"] {
        server.create("services", service("a", name, "x")).unwrap();
    }
    let api: Api<Service> = Api::all(client(&server).await);
    let mut events = watcher::watcher(api, watcher::Config::default().page_size(2)).boxed();
    let mut folded = Folded::default();
    while folded.relists == 0 {
        let event = tokio::time::timeout(Duration::from_secs(3), events.next()).await;
        folded.apply(&event.unwrap().unwrap().unwrap());
    }
    server.create("services", service("a", "s4", "x")).unwrap();
    folded.apply(&events.next().await.unwrap().unwrap());

    server.drop_watches();
    server.delete("services", "a", "s1").unwrap();
    server.apply("services", service("a", "s2", "y")).unwrap();
    server.create("services", service("b", "s5", "x")).unwrap();
    server.compact();

    // The resume is refused with 410 Expired; the watcher relists from scratch.
    assert_eq!(next(&mut events).await, "Error 410");
    while folded.relists == 1 {
        let event = tokio::time::timeout(Duration::from_secs(3), events.next()).await;
        folded.apply(&event.unwrap().unwrap().unwrap());
    }
    assert_eq!(folded.state, server_state(&server, "services"));
    assert_eq!(folded.state.len(), 4);
    server.create("services", service("b", "s6", "x")).unwrap();
    assert_eq!(next(&mut events).await, "Apply b/s6");
}

#[tokio::test]
async fn the_watcher_recovers_from_a_restart_on_the_same_port() {
    let server = Arc::new(server().await);
    let address = server.address();
    server
        .create("services", service("a", "before", "x"))
        .unwrap();
    let api: Api<Service> = Api::all(client(&server).await);
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    assert_eq!(take(&mut events, 3).await.last().unwrap(), "InitDone");

    let restarting = {
        let server = server.clone();
        tokio::spawn(async move { server.restart(Duration::from_millis(300)).await })
    };
    // Made while the server is down: seen once it is back, from the watch's version.
    tokio::time::sleep(Duration::from_millis(50)).await;
    server
        .create("services", service("a", "during", "x"))
        .unwrap();
    let mut seen = Vec::new();
    while seen
        .last()
        .is_none_or(|line: &String| line.starts_with("Failed"))
    {
        seen.push(next(&mut events).await);
    }
    assert_eq!(seen.last().unwrap(), "Apply a/during", "events: {seen:?}");
    restarting.await.unwrap().unwrap();
    assert_eq!(server.address(), address);
    server
        .create("services", service("a", "after", "x"))
        .unwrap();
    assert_eq!(next(&mut events).await, "Apply a/after");
}
