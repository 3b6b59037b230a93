//! Errors as JSON with the status code that fits: `{"error": {"kind", "message", "field"}}`.
//! An operation's [`AppError`] is worded as the socket words it ([`AppError::reply`]);
//! the status comes from its kind.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use orch_protocol::{ErrorKind, ErrorReply};

use crate::ops::AppError;

/// An error answer.
pub struct ApiError {
    status: StatusCode,
    reply: ErrorReply,
}

impl ApiError {
    /// An error with an explicit status.
    pub fn new(status: StatusCode, kind: ErrorKind, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            reply: ErrorReply::new(kind, message),
        }
    }
}

impl From<AppError> for ApiError {
    fn from(e: AppError) -> ApiError {
        ApiError::from(e.reply())
    }
}

/// A refusal worded in the protocol's terms (the budget of buffered bytes).
impl From<ErrorReply> for ApiError {
    fn from(reply: ErrorReply) -> ApiError {
        let status = match reply.kind {
            // Well-formed JSON that asks for something invalid (an unknown infra, a cycle).
            ErrorKind::BadRequest => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::VersionMismatch => StatusCode::BAD_REQUEST,
            ErrorKind::PermissionDenied => StatusCode::FORBIDDEN,
            ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError { status, reply }
    }
}

impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::JsonRejection) -> ApiError {
        use axum::extract::rejection::JsonRejection as R;
        let status = match &rejection {
            R::JsonDataError(_) => StatusCode::UNPROCESSABLE_ENTITY,
            R::BytesRejection(r) => r.status(),
            _ => StatusCode::BAD_REQUEST,
        };
        let kind = if status == StatusCode::PAYLOAD_TOO_LARGE {
            ErrorKind::TooLarge
        } else {
            ErrorKind::BadRequest
        };
        ApiError::new(status, kind, rejection.body_text())
    }
}

impl From<axum::extract::rejection::PathRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::PathRejection) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorKind::BadRequest,
            rejection.body_text(),
        )
    }
}

impl From<axum::extract::rejection::QueryRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::QueryRejection) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorKind::BadRequest,
            rejection.body_text(),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(body(&self.reply))).into_response()
    }
}

/// The JSON body of an error answer: `{"error": {"kind", "message", "field"}}`.
pub fn body(reply: &ErrorReply) -> serde_json::Value {
    serde_json::json!({ "error": reply })
}
