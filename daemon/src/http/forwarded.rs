//! HTTP changes asked of a standby, carried out by the leader (see
//! [`crate::cluster::relay`]): the standby checks the bearer token, the role and the body's
//! size as for any route, then forwards the request (method, path and query, content type,
//! body; no other header) with the caller's identity; the leader runs it through a router
//! of the forwarded operations' routes ([`router`]), with that caller instead of a token,
//! and the standby answers with the leader's status, content type and body. A standby
//! started with `--http-auth none` forwards its callers as admins, as it serves them.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use orch_protocol::{Actor, ErrorKind, ErrorReply};
use serde::{Deserialize, Serialize};
use tower::ServiceExt as _;

use super::error::ApiError;
use super::routes::{self, Caller};
use super::{MAX_BODY, guard, table_router};
use crate::ops::Context;
use crate::policy::Role;
use crate::server::forwarded::MAX_FORWARDED_ANSWER;

/// An HTTP request as a standby forwards it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpRequest {
    /// `POST`, `DELETE`, ...
    method: String,
    /// The path and query.
    uri: String,
    /// The request's content type, if it had one.
    content_type: Option<String>,
    /// The body (the forwarded routes take JSON).
    body: String,
    /// The name of the caller's token (on the standby).
    token: String,
}

/// What a forwarded request's row holds: `{"http": ...}` (a socket request is tagged
/// `request` instead).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    http: HttpRequest,
}

/// The leader's answer.
#[derive(Debug, Serialize, Deserialize)]
struct HttpAnswer {
    status: u16,
    content_type: Option<String>,
    body: String,
}

/// The standby's handler of the forwarded operations' routes (behind the token and role
/// checks): the leader's answer.
pub async fn forward(State(ctx): State<Arc<Context>>, request: Request) -> Response {
    let (Some(relay), Some(caller)) = (&ctx.relay, request.extensions().get::<Caller>().cloned())
    else {
        return ApiError::from(ctx.not_leader()).into_response();
    };
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, MAX_BODY).await else {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::TooLarge,
            format!("the request body exceeds the limit of {MAX_BODY} bytes, or could not be read"),
        )
        .into_response();
    };
    let Ok(body) = String::from_utf8(body.to_vec()) else {
        return bad_request("the request body is not UTF-8 text (JSON is expected)");
    };
    let envelope = Envelope {
        http: HttpRequest {
            method: parts.method.to_string(),
            uri: parts
                .uri
                .path_and_query()
                .map_or_else(|| parts.uri.path().to_string(), |p| p.to_string()),
            content_type: parts
                .headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            body,
            token: caller.token,
        },
    };
    let Ok(request) = serde_json::to_vec(&envelope) else {
        return ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Internal,
            "the request cannot be forwarded",
        )
        .into_response();
    };
    match relay
        .forward_bytes(&caller.actor, caller.role, request)
        .await
    {
        Ok(reply) => answer_of(&reply),
        Err(reply) => ApiError::from(reply).into_response(),
    }
}

/// The response a leader's reply stands for: its HTTP answer, or the error it answered
/// with (as socket frames) when it refused the request.
fn answer_of(reply: &[u8]) -> Response {
    if let Ok(answer) = serde_json::from_slice::<HttpAnswer>(reply) {
        let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
        let mut response = (status, answer.body).into_response();
        if let Some(value) = answer
            .content_type
            .and_then(|c| HeaderValue::from_str(&c).ok())
        {
            response.headers_mut().insert(header::CONTENT_TYPE, value);
        }
        return response;
    }
    let refused = crate::server::forwarded::split_frames(reply)
        .ok()
        .and_then(|frames| frames.first().copied())
        .and_then(|frame| serde_json::from_slice::<orch_protocol::Response>(frame).ok());
    match refused {
        Some(orch_protocol::Response::Error(reply)) => ApiError::from(reply).into_response(),
        _ => ApiError::new(
            StatusCode::BAD_GATEWAY,
            ErrorKind::Internal,
            "the leader's answer to the forwarded request is not well formed",
        )
        .into_response(),
    }
}

/// A 400 naming `problem`.
fn bad_request(problem: &str) -> Response {
    ApiError::new(StatusCode::BAD_REQUEST, ErrorKind::BadRequest, problem).into_response()
}

/// The HTTP request a forwarded row holds, if it holds one.
pub fn parse(request: &[u8]) -> Option<HttpRequest> {
    serde_json::from_slice::<Envelope>(request)
        .ok()
        .map(|e| e.http)
}

/// The leader's router of the forwarded operations' routes (the role each needs
/// checked; any other route is a 404).
pub fn router(ctx: Arc<Context>) -> Router {
    table_router(|op, route| {
        op.forwarded().then(|| {
            routes::bind(route.id, route.method)
                .route_layer(from_fn_with_state(op.access, guard::authorize))
        })
    })
    .fallback(guard::not_found)
    .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
    .with_state(ctx)
}

/// Runs `request` through `router` as `actor` with `role`: the answer to send back.
pub async fn answer(router: &Router, request: HttpRequest, actor: Actor, role: Role) -> Vec<u8> {
    let answer = match run(router, request, actor, role).await {
        Ok(answer) => answer,
        Err((kind, message)) => {
            let reply = ErrorReply::new(kind, message);
            return crate::server::forwarded::error_frames(reply);
        }
    };
    serde_json::to_vec(&answer).unwrap_or_default()
}

/// Runs `request` through `router`; its status, type and body, or what went wrong.
async fn run(
    router: &Router,
    request: HttpRequest,
    actor: Actor,
    role: Role,
) -> Result<HttpAnswer, (ErrorKind, String)> {
    let bad = |message: String| (ErrorKind::BadRequest, message);
    let method = axum::http::Method::from_bytes(request.method.as_bytes()).map_err(|_| {
        bad(format!(
            "a forwarded request with the method {:?}",
            request.method
        ))
    })?;
    let mut builder = Request::builder().method(method).uri(&request.uri);
    if let Some(content_type) = &request.content_type {
        builder = builder.header(header::CONTENT_TYPE, content_type);
    }
    let caller = Caller {
        actor,
        token: request.token,
        role,
    };
    let http = builder
        .extension(caller)
        .body(Body::from(request.body))
        .map_err(|e| bad(format!("a forwarded request that is not valid HTTP: {e}")))?;
    let response = router.clone().oneshot(http).await.map_err(|e| {
        (
            ErrorKind::Internal,
            format!("the forwarded request failed: {e}"),
        )
    })?;
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = http_body_util::Limited::new(response.into_body(), MAX_FORWARDED_ANSWER)
        .collect()
        .await
        .map_err(|e| {
            let message = format!(
                "the answer is over {MAX_FORWARDED_ANSWER} bytes, or could not be read: {e}"
            );
            (ErrorKind::TooLarge, message)
        })?
        .to_bytes();
    Ok(HttpAnswer {
        status,
        content_type,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_http_envelope_is_read_as_an_http_request() {
        let http = HttpRequest {
            method: "POST".into(),
            uri: "/test/environments?x=1".into(),
            content_type: Some("application/json".into()),
            body: "{}".into(),
            token: "ci".into(),
        };
        let envelope = serde_json::to_vec(&Envelope { http: http.clone() }).unwrap();
        assert_eq!(parse(&envelope), Some(http));
        assert_eq!(parse(br#"{"request":"shutdown"}"#), None);
        assert_eq!(parse(br#"{"http":{"method":"GET"}}"#), None);
        let extra = br#"{"http":{"method":"GET","uri":"/","content_type":null,"body":"","token":"t"},"request":"shutdown"}"#;
        assert_eq!(parse(extra), None, "nothing else rides along");
    }

    #[test]
    fn a_refusal_in_frames_becomes_its_status_and_anything_else_a_bad_gateway() {
        let refused = crate::server::forwarded::error_frames(ErrorReply::new(
            ErrorKind::PermissionDenied,
            "no",
        ));
        assert_eq!(answer_of(&refused).status(), StatusCode::FORBIDDEN);
        assert_eq!(answer_of(b"junk").status(), StatusCode::BAD_GATEWAY);
        let answer = serde_json::to_vec(&HttpAnswer {
            status: 201,
            content_type: Some("application/json".into()),
            body: "[]".into(),
        })
        .unwrap();
        let response = answer_of(&answer);
        assert_eq!(response.status(), StatusCode::CREATED);
        assert_eq!(
            response.headers().get(header::CONTENT_TYPE).unwrap(),
            "application/json"
        );
    }
}
