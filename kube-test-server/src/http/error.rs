//! Errors as the apiserver answers them: an HTTP status and a `Status` body.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::selector::SelectorError;
use crate::store::StoreError;
use crate::wire;

#[derive(Debug)]
pub struct ApiError {
    code: StatusCode,
    reason: &'static str,
    message: String,
}

pub type ApiResult = Result<Response, ApiError>;

impl ApiError {
    pub fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    pub fn unknown_path() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        let (code, reason) = match &error {
            StoreError::UnknownResource(_) | StoreError::NotFound { .. } => {
                (StatusCode::NOT_FOUND, "NotFound")
            }
            StoreError::AlreadyExists { .. } => (StatusCode::CONFLICT, "AlreadyExists"),
            StoreError::Conflict { .. } => (StatusCode::CONFLICT, "Conflict"),
            StoreError::Invalid(_) => (StatusCode::UNPROCESSABLE_ENTITY, "Invalid"),
            StoreError::Expired { .. } | StoreError::ContinueExpired => {
                (StatusCode::GONE, "Expired")
            }
            StoreError::InvalidContinue(_) => (StatusCode::BAD_REQUEST, "BadRequest"),
        };
        Self::new(code, reason, error.to_string())
    }
}

impl From<SelectorError> for ApiError {
    fn from(error: SelectorError) -> Self {
        Self::bad_request(error.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = wire::status(self.code.as_u16(), self.reason, &self.message);
        (self.code, Json(body)).into_response()
    }
}
