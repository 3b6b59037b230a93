//! What stands before every protected route: the bearer token ([`authenticate`]), the
//! role its operation needs ([`authorize`], from the operations table) and the body read
//! whole within its limits ([`buffer_body`]); and the JSON 404 of unknown routes.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use orch_protocol::{Actor, ErrorKind};

use super::auth;
use super::error::ApiError;
use super::routes::Caller;
use super::{MAX_BODY, Shim};
use crate::policy::{Access, Role};
use crate::server::limits::Limits;

/// Reads a request's whole body before its handler runs, within `--read-timeout` and
/// inside the budget of buffered bytes shared with the socket, so that a slow or stalled
/// body holds neither the connection nor memory for long.
pub async fn buffer_body(
    State(limits): State<Arc<Limits>>,
    request: Request,
    next: Next,
) -> Response {
    use axum::body::{Body, HttpBody};
    let hint = request.body().size_hint();
    if request.body().is_end_stream() || hint.lower() > MAX_BODY as u64 {
        // Nothing to read, or refused by the body limit (413) without reading.
        return next.run(request).await;
    }
    let expected = hint.exact().map_or(MAX_BODY, |n| n as usize);
    let reservation = match limits.budget.reserve(expected, limits.read_timeout).await {
        Ok(reservation) => reservation,
        Err(reply) => return ApiError::from(reply).into_response(),
    };
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    let bytes = match tokio::time::timeout(limits.read_timeout, limited.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorKind::TooLarge,
                format!("the request body exceeds the limit of {MAX_BODY} bytes"),
            )
            .into_response();
        }
        Ok(Err(e)) => {
            return ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorKind::BadRequest,
                format!("the request body could not be read: {e}"),
            )
            .into_response();
        }
        Err(_) => {
            return ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                ErrorKind::BadRequest,
                format!(
                    "the request body did not arrive within {} (--read-timeout)",
                    humantime::format_duration(limits.read_timeout)
                ),
            )
            .into_response();
        }
    };
    drop(reservation);
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Checks the bearer token; records who asks (as the request's [`Caller`]).
pub async fn authenticate(State(shim): State<Shim>, mut request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let token = match (presented, shim.open) {
        (_, true) => auth::Token {
            name: "anonymous".into(),
            role: Role::Admin,
            token: String::new(),
            created_at: None,
        },
        (None, false) => {
            return unauthorized(
                "no bearer token: send `Authorization: Bearer <token>` (tokens.json in the data directory)",
            );
        }
        (Some(presented), false) => match shim.tokens.find(presented) {
            Some(token) => token,
            None => return unauthorized("the bearer token is not valid"),
        },
    };
    request.extensions_mut().insert(Caller {
        actor: Actor {
            uid: crate::socket::owner_uid(),
            interface: format!("http (token {}, {})", token.name, token.role.as_str()),
        },
        token: token.name,
        role: token.role,
    });
    next.run(request).await
}

/// Refuses (403) a caller whose role falls short of what the route's operation needs.
pub async fn authorize(State(access): State<Access>, request: Request, next: Next) -> Response {
    let Some(caller) = request.extensions().get::<Caller>() else {
        return unauthorized("no bearer token: send `Authorization: Bearer <token>`");
    };
    if let Err(needed) = access.check(caller.role) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorKind::PermissionDenied,
            format!(
                "the token `{}` has the role {}; {} {} needs {}",
                caller.token,
                caller.role.as_str(),
                request.method(),
                request.uri().path(),
                needed.as_str()
            ),
        )
        .into_response();
    }
    next.run(request).await
}

/// A 401 asking for a bearer token.
fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::new(
        StatusCode::UNAUTHORIZED,
        ErrorKind::PermissionDenied,
        message,
    )
    .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}

/// The answer to a route that is not in the operations table.
pub async fn not_found(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorKind::NotFound,
        format!("no route {} {}", request.method(), request.uri().path()),
    )
}
