use serde_json::{Value, json};

use super::*;
use crate::resource::shoal_resources;
use crate::selector::Selection;

fn services() -> GroupResource {
    GroupResource::from("services")
}

fn service(namespace: &str, name: &str) -> Value {
    json!({"metadata": {"namespace": namespace, "name": name, "labels": {"app": name}}})
}

fn store_with_history(capacity: usize) -> Store {
    Store::new(shoal_resources(), capacity)
}

fn names(page: &ListPage) -> Vec<&str> {
    page.items
        .iter()
        .map(|item| item["metadata"]["name"].as_str().unwrap())
        .collect()
}

fn page(limit: usize, continue_token: Option<String>) -> ListRequest {
    ListRequest {
        selection: Selection::default(),
        limit: Some(limit),
        continue_token,
    }
}

#[test]
fn writes_take_the_next_global_revision_and_stamp_identity() {
    let mut store = store_with_history(10);
    let created = store.create(&services(), service("a", "web")).unwrap();
    let pod = json!({"metadata": {"namespace": "a", "name": "p"}});
    let other = store.create(&GroupResource::from("pods"), pod).unwrap();
    assert_eq!((created.revision, other.revision), (1, 2));
    let object = &created.object;
    assert_eq!(object["metadata"]["resourceVersion"], "1");
    assert_eq!(object["kind"], "Service");
    assert_eq!(object["apiVersion"], "v1");
    let uid = object["metadata"]["uid"].as_str().unwrap().to_owned();
    assert!(
        object["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );

    let replaced = store.replace(&services(), service("a", "web")).unwrap();
    assert_eq!(replaced.kind, ChangeKind::Modified);
    assert_eq!(replaced.object["metadata"]["resourceVersion"], "3");
    assert_eq!(replaced.object["metadata"]["uid"], uid.as_str());
    assert_eq!(replaced.previous.as_deref(), Some(&**object));

    let deleted = store
        .delete(&services(), &ObjectKey::new("a", "web"))
        .unwrap();
    assert_eq!(deleted.kind, ChangeKind::Deleted);
    assert_eq!(deleted.object["metadata"]["resourceVersion"], "4");
    assert_eq!(store.revision(), 4);
    assert!(
        store
            .get(&services(), &ObjectKey::new("a", "web"))
            .is_none()
    );
}

#[test]
fn writes_are_checked() {
    let mut store = store_with_history(10);
    store.create(&services(), service("a", "web")).unwrap();
    assert!(matches!(
        store.create(&services(), service("a", "web")),
        Err(StoreError::AlreadyExists { .. })
    ));
    assert!(matches!(
        store.replace(&services(), service("a", "db")),
        Err(StoreError::NotFound { .. })
    ));
    let stale = json!({"metadata": {"namespace": "a", "name": "web", "resourceVersion": "0"}});
    assert!(matches!(
        store.replace(&services(), stale.clone()),
        Err(StoreError::Conflict { .. })
    ));
    assert!(
        store.apply(&services(), stale).is_ok(),
        "apply ignores the version"
    );
    let no_namespace = json!({"metadata": {"name": "x"}});
    assert!(matches!(
        store.create(&services(), no_namespace),
        Err(StoreError::Invalid(_))
    ));
    let node_in_namespace = json!({"metadata": {"name": "n", "namespace": "a"}});
    assert!(matches!(
        store.create(&GroupResource::from("nodes"), node_in_namespace),
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store.create(
            &GroupResource::from("widgets.example.com"),
            service("a", "w")
        ),
        Err(StoreError::UnknownResource(_))
    ));
}

#[test]
fn history_replays_after_a_revision_until_it_is_dropped() {
    let mut store = store_with_history(3);
    for name in ["a", "b", "c", "d"] {
        store.create(&services(), service("ns", name)).unwrap();
    }
    let revisions = |since| -> Vec<u64> {
        let changes = store.changes_since(&services(), since).unwrap();
        changes.iter().map(|change| change.revision).collect()
    };
    assert_eq!(revisions(1), [2, 3, 4]);
    assert_eq!(revisions(3), [4]);
    assert_eq!(revisions(4), Vec::<u64>::new());
    assert_eq!(
        store.changes_since(&services(), 0),
        Err(StoreError::Expired {
            requested: 0,
            oldest: 1
        })
    );
    store.compact();
    assert!(store.changes_since(&services(), 4).unwrap().is_empty());
    let expired = store.changes_since(&services(), 3).unwrap_err();
    assert_eq!(expired.to_string(), "too old resource version: 3 (4)");
}

#[test]
fn history_replay_is_per_resource() {
    let mut store = store_with_history(10);
    store.create(&services(), service("ns", "a")).unwrap();
    let pod = json!({"metadata": {"namespace": "ns", "name": "p"}});
    store.create(&GroupResource::from("pods"), pod).unwrap();
    let changes = store.changes_since(&services(), 0).unwrap();
    assert_eq!(changes.len(), 1);
}

#[test]
fn pages_cover_every_item_once_in_key_order() {
    let mut store = store_with_history(100);
    for (namespace, name) in [("b", "x"), ("a", "y"), ("a", "x"), ("c", "z"), ("b", "a")] {
        store.create(&services(), service(namespace, name)).unwrap();
    }
    let first = store.list(&services(), &page(2, None)).unwrap();
    assert_eq!(names(&first), ["x", "y"]);
    assert_eq!(first.revision, 5);
    let second = store
        .list(&services(), &page(2, first.continue_token))
        .unwrap();
    assert_eq!(names(&second), ["a", "x"]);
    let third = store
        .list(&services(), &page(2, second.continue_token))
        .unwrap();
    assert_eq!(names(&third), ["z"]);
    assert_eq!(third.continue_token, None);
    let exact = store.list(&services(), &page(5, None)).unwrap();
    assert_eq!(exact.continue_token, None, "no token when nothing follows");
}

#[test]
fn later_pages_serve_the_first_pages_snapshot() {
    let mut store = store_with_history(100);
    for name in ["a", "b", "c", "d"] {
        store.create(&services(), service("ns", name)).unwrap();
    }
    let first = store.list(&services(), &page(2, None)).unwrap();
    // Writes between pages: deleted, added, modified, all after the first page's keys.
    store
        .delete(&services(), &ObjectKey::new("ns", "c"))
        .unwrap();
    store.create(&services(), service("ns", "bb")).unwrap();
    let mut changed = service("ns", "d");
    changed["spec"] = json!({"changed": true});
    store.replace(&services(), changed).unwrap();
    let second = store
        .list(&services(), &page(10, first.continue_token.clone()))
        .unwrap();
    assert_eq!(names(&second), ["c", "d"]);
    assert_eq!(second.revision, 4);
    assert_eq!(second.items[1]["metadata"]["resourceVersion"], "4");

    store.compact();
    assert_eq!(
        store.list(&services(), &page(10, first.continue_token)),
        Err(StoreError::ContinueExpired)
    );
}

#[test]
fn lists_apply_the_selection_before_the_limit() {
    let mut store = store_with_history(100);
    for name in ["a", "b", "c", "d"] {
        store.create(&services(), service("ns", name)).unwrap();
    }
    store.create(&services(), service("other", "b")).unwrap();
    let request = |labels: &str, namespace: Option<&str>, continue_token| ListRequest {
        selection: Selection::parse(namespace.map(str::to_owned), Some(labels), None).unwrap(),
        limit: Some(1),
        continue_token,
    };
    let first = store
        .list(&services(), &request("app in (b,d)", Some("ns"), None))
        .unwrap();
    assert_eq!(names(&first), ["b"]);
    let token = first.continue_token;
    let second = store
        .list(&services(), &request("app in (b,d)", Some("ns"), token))
        .unwrap();
    assert_eq!(names(&second), ["d"]);
    assert_eq!(second.continue_token, None);
}

#[test]
fn malformed_continue_tokens_are_refused() {
    let store = store_with_history(10);
    for token in ["", "x/a/b", "7/a/b", "1/a"] {
        let result = store.list(&services(), &page(1, Some(token.to_owned())));
        assert!(
            matches!(result, Err(StoreError::InvalidContinue(_))),
            "{token:?}"
        );
    }
}
