use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::resource::GroupResource;
use crate::store::ObjectKey;

fn object(app: &str, revision: u64) -> Arc<Value> {
    Arc::new(json!({"metadata": {
        "namespace": "ns", "name": "a", "labels": {"app": app},
        "resourceVersion": revision.to_string(),
    }}))
}

fn change(kind: ChangeKind, previous: Option<&str>, now: &str) -> Change {
    Change {
        revision: 7,
        resource: GroupResource::from("services"),
        key: ObjectKey::new("ns", "a"),
        kind,
        object: object(now, 7),
        previous: previous.map(|app| object(app, 6)),
    }
}

fn web() -> Selection {
    Selection::parse(None, Some("app=web"), None).unwrap()
}

fn event_type(change: &Change) -> Option<EventType> {
    event_for(&web(), change).map(|(event_type, _)| event_type)
}

#[test]
fn unfiltered_changes_map_one_to_one() {
    let all = Selection::default();
    for (kind, expected) in [
        (ChangeKind::Added, EventType::Added),
        (ChangeKind::Modified, EventType::Modified),
        (ChangeKind::Deleted, EventType::Deleted),
    ] {
        let previous = (kind != ChangeKind::Added).then_some("web");
        let (sent, object) = event_for(&all, &change(kind, previous, "web")).unwrap();
        assert_eq!(sent, expected);
        assert_eq!(object["metadata"]["resourceVersion"], "7");
    }
}

#[test]
fn entering_and_leaving_a_selection_is_added_and_deleted() {
    assert_eq!(
        event_type(&change(ChangeKind::Added, None, "web")),
        Some(EventType::Added)
    );
    assert_eq!(event_type(&change(ChangeKind::Added, None, "db")), None);
    let entered = change(ChangeKind::Modified, Some("db"), "web");
    assert_eq!(event_type(&entered), Some(EventType::Added));
    let stayed = change(ChangeKind::Modified, Some("web"), "web");
    assert_eq!(event_type(&stayed), Some(EventType::Modified));
    let never = change(ChangeKind::Modified, Some("db"), "db");
    assert_eq!(event_type(&never), None);
    let deleted_unseen = change(ChangeKind::Deleted, Some("db"), "db");
    assert_eq!(event_type(&deleted_unseen), None);
}

#[test]
fn leaving_sends_the_last_matching_state_at_the_new_version() {
    let left = change(ChangeKind::Modified, Some("web"), "db");
    let (sent, object) = event_for(&web(), &left).unwrap();
    assert_eq!(sent, EventType::Deleted);
    assert_eq!(object["metadata"]["labels"]["app"], "web");
    assert_eq!(object["metadata"]["resourceVersion"], "7");
}

#[test]
fn watch_start_from_parameters() {
    let now = |end| {
        Some(WatchStart::Now {
            initial_events_end: end,
        })
    };
    assert_eq!(WatchStart::parse(None, false), now(false));
    assert_eq!(WatchStart::parse(Some("0"), false), now(false));
    assert_eq!(WatchStart::parse(Some("0"), true), now(true));
    assert_eq!(
        WatchStart::parse(Some("12"), false),
        Some(WatchStart::After(12))
    );
    assert_eq!(WatchStart::parse(Some("x"), false), None);
}
