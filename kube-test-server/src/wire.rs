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

/// `{"kind": "<Kind>List", ...}` for one page.
pub fn list(resource: &ResourceType, version: &str, page: &ListPage) -> Value {
    let items: Vec<Value> = page
        .items
        .iter()
        .map(|item| served_as(item, resource, version))
        .collect();
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
