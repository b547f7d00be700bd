//! POST, PUT and DELETE: the same writes the Rust API makes, over HTTP.

use axum::Json;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::Value;

use super::Target;
use super::error::{ApiError, ApiResult};
use crate::hub::Hub;
use crate::resource::ResourceType;
use crate::store::ObjectKey;
use crate::wire;

pub fn create(hub: &Hub, resource: &ResourceType, target: &Target, body: &[u8]) -> ApiResult {
    let object = object_for(target, None, body)?;
    let change = hub.write(|store| store.create(&resource.group_resource(), object))?;
    let served = wire::served_as(&change.object, resource, &target.version);
    Ok((StatusCode::CREATED, Json(served)).into_response())
}

pub fn replace(
    hub: &Hub,
    resource: &ResourceType,
    target: &Target,
    name: &str,
    body: &[u8],
) -> ApiResult {
    let object = object_for(target, Some(name), body)?;
    let change = hub.write(|store| store.replace(&resource.group_resource(), object))?;
    Ok(Json(wire::served_as(&change.object, resource, &target.version)).into_response())
}

/// Deletion is immediate (no finalizers, no grace period): answers with the object's
/// last state, as the apiserver does for such a delete.
pub fn delete(hub: &Hub, resource: &ResourceType, target: &Target, name: &str) -> ApiResult {
    let key = ObjectKey::new(target.namespace.clone().unwrap_or_default(), name);
    let change = hub.write(|store| store.delete(&resource.group_resource(), &key))?;
    Ok(Json(wire::served_as(&change.object, resource, &target.version)).into_response())
}

/// The request body, with the namespace (and name) of the path: filled in when absent,
/// refused when different, as the apiserver does.
fn object_for(target: &Target, name: Option<&str>, body: &[u8]) -> Result<Value, ApiError> {
    let mut object: Value = serde_json::from_slice(body)
        .map_err(|error| ApiError::bad_request(format!("invalid JSON body: {error}")))?;
    let Some(metadata) = object
        .as_object_mut()
        .map(|fields| {
            fields
                .entry("metadata")
                .or_insert_with(|| Value::Object(Default::default()))
        })
        .and_then(Value::as_object_mut)
    else {
        return Err(ApiError::bad_request(
            "the body must be a JSON object with metadata",
        ));
    };
    for (field, expected) in [("namespace", target.namespace.as_deref()), ("name", name)] {
        let Some(expected) = expected else { continue };
        match metadata.get(field).and_then(Value::as_str) {
            None | Some("") => {
                metadata.insert(field.into(), expected.into());
            }
            Some(given) if given != expected => {
                return Err(ApiError::bad_request(format!(
                    "the {field} of the provided object does not match the {field} sent on the request"
                )));
            }
            Some(_) => {}
        }
    }
    Ok(object)
}
