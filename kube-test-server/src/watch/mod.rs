//! What a watch sends for each change, given what it selects. No I/O.
//!
//! A watch with selectors sees an object's changes as the apiserver's watch cache shows
//! them: a change that makes an object match is ADDED, one that makes it stop matching
//! is DELETED (its last matching state, at the new resourceVersion), and changes to
//! objects it never selected are not sent at all.

use std::sync::Arc;

use serde_json::Value;

use crate::selector::Selection;
use crate::store::{Change, ChangeKind};

/// The `type` of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
            Self::Bookmark => "BOOKMARK",
            Self::Error => "ERROR",
        }
    }
}

/// Where a watch starts, from its `resourceVersion` and `sendInitialEvents` parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchStart {
    /// No version or "0": every current object as ADDED, then live changes. With
    /// `initial_events_end`, a BOOKMARK annotated `k8s.io/initial-events-end` follows the
    /// current objects (the streaming-list protocol).
    Now { initial_events_end: bool },
    /// After this revision: the retained changes since, then live changes.
    After(u64),
}

impl WatchStart {
    /// `None` when the version is not a number.
    pub fn parse(resource_version: Option<&str>, send_initial_events: bool) -> Option<Self> {
        match resource_version.unwrap_or("") {
            "" | "0" => Some(Self::Now {
                initial_events_end: send_initial_events,
            }),
            _ if send_initial_events => Some(Self::Now {
                initial_events_end: true,
            }),
            version => version.parse().ok().map(Self::After),
        }
    }
}

/// The event a watch selecting `selection` sends for `change`, if any.
pub fn event_for(selection: &Selection, change: &Change) -> Option<(EventType, Arc<Value>)> {
    let matched_before = change
        .previous
        .as_ref()
        .is_some_and(|previous| selection.matches(previous));
    let matches_now = change.kind != ChangeKind::Deleted && selection.matches(&change.object);
    match (change.kind, matched_before, matches_now) {
        (ChangeKind::Added, _, true) => Some((EventType::Added, change.object.clone())),
        (ChangeKind::Modified, true, true) => Some((EventType::Modified, change.object.clone())),
        (ChangeKind::Modified, false, true) => Some((EventType::Added, change.object.clone())),
        (ChangeKind::Modified, true, false) => {
            let previous = change.previous.as_deref().cloned().unwrap_or_default();
            let mut last_matching = previous;
            last_matching["metadata"]["resourceVersion"] = change.revision.to_string().into();
            Some((EventType::Deleted, Arc::new(last_matching)))
        }
        (ChangeKind::Deleted, true, _) => Some((EventType::Deleted, change.object.clone())),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
