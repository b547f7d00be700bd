//! The initial list, paginated, then live changes.

use kube::Api;
use kube::runtime::watcher;

use crate::support::*;

#[tokio::test]
async fn paginated_initial_list_is_one_snapshot_then_changes_arrive_once() {
    let server = server().await;
    for (namespace, name) in [
        ("a", "s1"),
        ("a", "s2"),
        ("a", "s3"),
        ("b", "s1"),
        ("b", "s2"),
    ] {
        server
            .create("services", service(namespace, name, name))
            .unwrap();
    }
    server.create("services", service("c", "s1", "s1")).unwrap();
    server.create("services", service("c", "s2", "s2")).unwrap();
    let api = Api::all(client(&server).await);
    let mut events = watch_services(api, watcher::Config::default().page_size(3));

    assert_eq!(take(&mut events, 2).await, ["Init", "InitApply a/s1"]);
    // The first page (3 items) has been read. Writes now must not show in later pages,
    // which come from the first page's snapshot, but must follow InitDone.
    server.delete("services", "c", "s1").unwrap();
    server.create("services", service("b", "s0", "s0")).unwrap();
    server
        .apply("services", service("b", "s2", "changed"))
        .unwrap();
    let rest = take(&mut events, 7).await;
    let initial = [
        "InitApply a/s2",
        "InitApply a/s3",
        "InitApply b/s1",
        "InitApply b/s2",
        "InitApply c/s1",
        "InitApply c/s2",
        "InitDone",
    ];
    assert_eq!(rest, initial);
    let caught_up = take(&mut events, 3).await;
    assert_eq!(caught_up, ["Delete c/s1", "Apply b/s0", "Apply b/s2"]);

    // Live: create, update, delete.
    server.create("services", service("a", "s4", "s4")).unwrap();
    server
        .apply("services", service("a", "s4", "other"))
        .unwrap();
    server.delete("services", "a", "s2").unwrap();
    let live = take(&mut events, 3).await;
    assert_eq!(live, ["Apply a/s4", "Apply a/s4", "Delete a/s2"]);
    assert_quiet(&mut events).await;
}

#[tokio::test]
async fn streaming_list_sends_initial_events_then_changes() {
    let server = server().await;
    server.create("services", service("a", "s1", "s1")).unwrap();
    server.create("services", service("a", "s2", "s2")).unwrap();
    let api = Api::all(client(&server).await);
    let mut events = watch_services(api, watcher::Config::default().streaming_lists());
    let initial = take(&mut events, 4).await;
    assert_eq!(
        initial,
        ["Init", "InitApply a/s1", "InitApply a/s2", "InitDone"]
    );
    server.create("services", service("a", "s3", "s3")).unwrap();
    assert_eq!(next(&mut events).await, "Apply a/s3");
}
