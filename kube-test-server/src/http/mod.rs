//! The HTTP layer: routes Kubernetes API paths to the hub, and only moves bytes.
//!
//! ```text
//!   GET    /api/v1/{plural}                      list or watch, all namespaces
//!   GET    /api/v1/namespaces/{ns}/{plural}      list or watch, one namespace
//!   POST   ...same collection paths...           create
//!   GET    /api/v1/[namespaces/{ns}/]{plural}/{name}   get one
//!   PUT    (same)                                replace
//!   DELETE (same)                                delete
//!   /apis/{group}/{version}/... the same shapes for named groups
//! ```

mod error;
mod list;
mod target;
mod watch;
mod write;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::hub::Hub;
pub(crate) use error::ApiError;
use target::Target;

/// The router serving every path under `/api` and `/apis`.
pub fn router(hub: Arc<Hub>) -> Router {
    Router::new()
        .route("/api/{*path}", axum::routing::any(handle))
        .route("/apis/{*path}", axum::routing::any(handle))
        .with_state(hub)
}

/// The query parameters of the Kubernetes API this server reads; others are ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Params {
    watch: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    limit: Option<usize>,
    #[serde(rename = "continue")]
    continue_token: Option<String>,
    resource_version: Option<String>,
    allow_watch_bookmarks: Option<String>,
    timeout_seconds: Option<u64>,
    send_initial_events: Option<String>,
}

/// Kubernetes accepts `true` and `1` for its boolean query parameters.
fn flag(value: Option<&String>) -> bool {
    matches!(value.map(String::as_str), Some("true" | "1"))
}

async fn handle(
    State(hub): State<Arc<Hub>>,
    method: Method,
    uri: Uri,
    params: Result<Query<Params>, axum::extract::rejection::QueryRejection>,
    body: Bytes,
) -> Response {
    let result = async {
        let Query(params) =
            params.map_err(|rejection| ApiError::bad_request(rejection.body_text()))?;
        let target = Target::parse(uri.path()).ok_or_else(ApiError::unknown_path)?;
        let resource = hub
            .read(|store| target.resource_type(store.registry()))
            .ok_or_else(ApiError::unknown_path)?;
        match (&method, target.name.as_deref()) {
            (&Method::GET, None) if flag(params.watch.as_ref()) => {
                watch::watch(hub, &resource, &target, &params)
            }
            (&Method::GET, None) => list::list(&hub, &resource, &target, &params),
            (&Method::GET, Some(name)) => list::get(&hub, &resource, &target, name),
            (&Method::POST, None) => write::create(&hub, &resource, &target, &body),
            (&Method::PUT, Some(name)) => write::replace(&hub, &resource, &target, name, &body),
            (&Method::DELETE, Some(name)) => write::delete(&hub, &resource, &target, name),
            _ => Err(ApiError::method_not_allowed()),
        }
    }
    .await;
    result.unwrap_or_else(IntoResponse::into_response)
}
