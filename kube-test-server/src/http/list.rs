//! GET of a collection (list) and of one object.

use axum::Json;
use axum::response::IntoResponse;

use super::error::{ApiError, ApiResult};
use super::{Params, Target};
use crate::hub::Hub;
use crate::resource::ResourceType;
use crate::selector::Selection;
use crate::store::{ListRequest, ObjectKey, StoreError};
use crate::wire;

/// Serves the current state whatever `resourceVersion`/`resourceVersionMatch` ask for:
/// the newest state satisfies "not older than" any version a client can know of.
pub fn list(hub: &Hub, resource: &ResourceType, target: &Target, params: &Params) -> ApiResult {
    let request = ListRequest {
        selection: selection(target, params)?,
        limit: params.limit,
        continue_token: params
            .continue_token
            .clone()
            .filter(|token| !token.is_empty()),
    };
    let page = hub.read(|store| store.list(&resource.group_resource(), &request))?;
    let list = wire::list(resource, &target.version, &page, hub.null_empty_lists());
    Ok(Json(list).into_response())
}

pub fn get(hub: &Hub, resource: &ResourceType, target: &Target, name: &str) -> ApiResult {
    let key = ObjectKey::new(target.namespace.clone().unwrap_or_default(), name);
    let object = hub
        .read(|store| store.get(&resource.group_resource(), &key))
        .ok_or_else(|| StoreError::NotFound {
            resource: resource.group_resource(),
            name: name.to_owned(),
        })?;
    Ok(Json(wire::served_as(&object, resource, &target.version)).into_response())
}

pub fn selection(target: &Target, params: &Params) -> Result<Selection, ApiError> {
    Ok(Selection::parse(
        target.namespace.clone(),
        params.label_selector.as_deref(),
        params.field_selector.as_deref(),
    )?)
}
