//! What a write sets on an object: revision, uid, creation time, kind and apiVersion.

use serde_json::{Map, Value};

use super::{ObjectKey, Result, StoreError};
use crate::resource::ResourceType;

/// The object's key, checking it has a name and a namespace exactly when it must.
pub fn key_of(resource: &ResourceType, object: &Value) -> Result<ObjectKey> {
    let text = |field: &str| {
        object
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let (namespace, name) = (text("namespace"), text("name"));
    if name.is_empty() {
        return Err(StoreError::Invalid("metadata.name: Required value".into()));
    }
    if resource.namespaced == namespace.is_empty() {
        let expected = if resource.namespaced {
            "required"
        } else {
            "not allowed"
        };
        return Err(StoreError::Invalid(format!(
            "metadata.namespace is {expected} for {}",
            resource.kind
        )));
    }
    Ok(ObjectKey::new(namespace, name))
}

/// A new object: revision, a uid and a creation timestamp of its own.
pub fn created(resource: &ResourceType, object: Value, revision: u64) -> Value {
    let mut object = typed(resource, object);
    let metadata = metadata_of(&mut object);
    // Unique per server: revisions are never reused, so neither are these.
    metadata.insert(
        "uid".into(),
        format!("00000000-0000-4000-8000-{revision:012x}").into(),
    );
    metadata.insert("creationTimestamp".into(), now().into());
    with_revision(object, revision)
}

/// A replacement keeps the identity of the object it replaces.
pub fn replaced(resource: &ResourceType, object: Value, previous: &Value, revision: u64) -> Value {
    let mut object = typed(resource, object);
    let metadata = metadata_of(&mut object);
    for field in ["uid", "creationTimestamp"] {
        if let Some(value) = previous.pointer(&format!("/metadata/{field}")) {
            metadata.insert(field.into(), value.clone());
        }
    }
    with_revision(object, revision)
}

pub fn with_revision(mut object: Value, revision: u64) -> Value {
    metadata_of(&mut object).insert("resourceVersion".into(), revision.to_string().into());
    object
}

/// Fills `kind` and `apiVersion` when the writer left them out (the Rust API allows it).
fn typed(resource: &ResourceType, mut object: Value) -> Value {
    if let Some(fields) = object.as_object_mut() {
        fields
            .entry("kind")
            .or_insert_with(|| resource.kind.clone().into());
        fields
            .entry("apiVersion")
            .or_insert_with(|| resource.api_version(resource.preferred_version()).into());
    }
    object
}

fn metadata_of(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let fields = object.as_object_mut().expect("made an object above");
    let metadata = fields
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    metadata.as_object_mut().expect("made an object above")
}

/// RFC 3339 in whole seconds, as Kubernetes writes `metav1.Time`.
fn now() -> String {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string()
}
