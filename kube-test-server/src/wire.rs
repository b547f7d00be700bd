//! The JSON shapes of the Kubernetes API: lists, `Status` errors, watch event lines.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::resource::ResourceType;
use crate::store::ListPage;
use crate::watch::EventType;

/// An object as served under `version`: the same object, `apiVersion` rewritten, as a
/// CRD with several served versions (and no schema change between them) is served.
pub fn served_as(object: &Value, resource: &ResourceType, version: &str) -> Value {
    let mut served = object.clone();
    if let Some(fields) = served.as_object_mut() {
        fields.insert("apiVersion".into(), resource.api_version(version).into());
        fields.insert("kind".into(), resource.kind.clone().into());
    }
    served
}

/// `{"kind": "<Kind>List", ...}` for one page, as kube-apiserver writes it: the items
/// of a built-in kind without `apiVersion` and `kind` (the list says them once;
/// kubernetes/kubernetes#3030, #63676: only kubectl adds them back), a custom resource's
/// items with them. An empty page's items are `null` when `null_empty` says so.
pub fn list(resource: &ResourceType, version: &str, page: &ListPage, null_empty: bool) -> Value {
    let items: Vec<Value> = page
        .items
        .iter()
        .map(|item| {
            let mut served = served_as(item, resource, version);
            if resource.built_in
                && let Some(fields) = served.as_object_mut()
            {
                fields.remove("apiVersion");
                fields.remove("kind");
            }
            served
        })
        .collect();
    let items = if items.is_empty() && null_empty {
        Value::Null
    } else {
        Value::Array(items)
    };
    let mut metadata = json!({"resourceVersion": page.revision.to_string()});
    if let Some(token) = &page.continue_token {
        metadata["continue"] = token.clone().into();
    }
    json!({
        "kind": format!("{}List", resource.kind),
        "apiVersion": resource.api_version(version),
        "metadata": metadata,
        "items": items,
    })
}

/// A failure `Status`, the body of every error response and of watch ERROR events.
pub fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
}

/// A BOOKMARK's object: only kind, apiVersion and the resourceVersion the watch reached.
pub fn bookmark(resource: &ResourceType, version: &str, revision: u64, initial_end: bool) -> Value {
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({
        "kind": resource.kind,
        "apiVersion": resource.api_version(version),
        "metadata": metadata,
    })
}

/// One watch event: a JSON document on a line of its own.
pub fn event_line(event_type: EventType, object: &Value) -> Bytes {
    let event = json!({"type": event_type.as_str(), "object": object});
    let mut line = serde_json::to_vec(&event).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}
