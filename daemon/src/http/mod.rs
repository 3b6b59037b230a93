//! The HTTP shim (`--port N`): the seed's REST paths over the same handlers as the
//! socket, bound to loopback unless `--bind` says otherwise, behind bearer tokens with
//! roles ([`auth`]). Errors are JSON with the status that fits ([`error`]); the OpenAPI
//! document is generated from the code ([`openapi`]).

pub mod auth;
mod error;
pub mod openapi;
mod routes;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use http_body_util::BodyExt;
use orch_protocol::{Actor, ErrorKind, ErrorReply};
use tokio::sync::Semaphore;

use crate::metrics::Metrics;
use crate::server::Context;
use crate::server::limits::Limits;
use auth::{Role, Tokens};
use error::ApiError;
use routes::Caller;

/// The largest request body accepted (bigger ones get 413).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// How long a graceful stop lets HTTP answers under way finish before dropping them.
const DRAIN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// What the shim needs besides the handlers' context.
#[derive(Clone)]
pub struct Shim {
    /// `--http-auth none`: every request is an admin.
    open: bool,
    tokens: Arc<Tokens>,
    metrics: Arc<Metrics>,
}

/// The routes, with authentication in front of all but `/health` and `/openapi.json`.
pub fn router(ctx: Arc<Context>, tokens: Arc<Tokens>, metrics: Arc<Metrics>, open: bool) -> Router {
    let shim = Shim {
        open,
        tokens: tokens.clone(),
        metrics,
    };
    let protected = Router::new()
        .route("/tasks", get(routes::tasks))
        .route("/tasks/{id}", get(routes::task))
        .route("/workflows/servers/create", post(routes::servers_create))
        .route("/workflows/taskserv/create", post(routes::taskserv_create))
        .route("/workflows/cluster/create", post(routes::cluster_create))
        .route("/test/environments/create", post(routes::env_create))
        .route("/test/environments", get(routes::envs))
        .route(
            "/test/environments/{id}",
            get(routes::env).delete(routes::env_delete),
        )
        .route("/test/environments/{id}/run", post(routes::env_run))
        .route("/test/environments/{id}/logs", get(routes::env_logs))
        .route("/extensions/providers", get(routes::providers))
        .route("/extensions/taskservs", get(routes::taskservs))
        .route(
            "/extensions/taskservs/install",
            post(routes::taskserv_create),
        )
        .route("/extensions/clusters", get(routes::clusters))
        .route("/events", get(routes::events))
        .route("/audit", get(routes::audit))
        .route("/audit/verify", get(routes::audit_verify))
        .route(
            "/auth/tokens",
            get(routes::tokens).post(routes::token_create),
        )
        .route("/auth/tokens/{id}", delete(routes::token_revoke))
        .route("/metrics", get(serve_metrics))
        .layer(axum::Extension(tokens))
        .layer(middleware::from_fn_with_state(
            ctx.limits.clone(),
            buffer_body,
        ))
        .layer(middleware::from_fn_with_state(shim.clone(), authenticate))
        .with_state(ctx.clone());
    Router::new()
        .route("/health", get(routes::health))
        .route("/openapi.json", get(openapi_document))
        .with_state(ctx)
        .merge(protected)
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
}

/// Serves until `ctx.shutdown` is cancelled, at most `--max-http-connections` at once
/// (past it a client gets a 503), each held to the header read timeout; then waits for
/// the open connections to finish their answers.
pub async fn serve(listener: tokio::net::TcpListener, app: Router, ctx: Arc<Context>) {
    let limits = ctx.limits.clone();
    let slots = Arc::new(Semaphore::new(limits.max_http_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.read_timeout);
    loop {
        tokio::select! {
            () = ctx.shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => match slots.clone().try_acquire_owned() {
                    Ok(slot) => {
                        let connection = serve_connection(http.clone(), stream, app.clone(), ctx.shutdown.clone());
                        tokio::spawn(async move {
                            connection.await;
                            drop(slot);
                        });
                    }
                    Err(_) => refuse(stream, &limits),
                },
                Err(e) => {
                    // Typically out of file descriptors: back off instead of spinning.
                    tracing::warn!(error = %e, "HTTP accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            },
        }
    }
    drop(listener);
    let every_slot = u32::try_from(limits.max_http_connections).unwrap_or(u32::MAX);
    let drained = tokio::time::timeout(DRAIN_GRACE, slots.acquire_many(every_slot)).await;
    if drained.is_err() {
        // A client that does not read its answer must not keep the daemon from stopping.
        tracing::warn!(
            grace = ?DRAIN_GRACE,
            "HTTP answers still unfinished at shutdown are dropped"
        );
    }
}

/// Serves one connection; on shutdown, lets its current answer finish and closes it.
async fn serve_connection(
    http: hyper::server::conn::http1::Builder,
    stream: tokio::net::TcpStream,
    app: Router,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let service = hyper_util::service::TowerToHyperService::new(app);
    let connection = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "HTTP connection ended");
    }
}

/// Answers a client over the connection cap with a 503 and the JSON error body.
fn refuse(stream: tokio::net::TcpStream, limits: &Arc<Limits>) {
    let reply = ErrorReply::new(
        ErrorKind::Unavailable,
        format!(
            "the daemon already serves its limit of {} HTTP connections (--max-http-connections); try again later",
            limits.max_http_connections
        ),
    );
    let body = error::body(&reply).to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    limits.refuse(stream, "http", answer.into_bytes());
}

/// Reads a request's whole body before its handler runs, within `--read-timeout` and
/// inside the budget of buffered bytes shared with the socket, so that a slow or stalled
/// body holds neither the connection nor memory for long.
async fn buffer_body(State(limits): State<Arc<Limits>>, request: Request, next: Next) -> Response {
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

/// Binds the shim's listener.
pub async fn bind(address: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {address}: {e}")))
}

/// Checks the bearer token and the role the route needs; records who asks.
async fn authenticate(State(shim): State<Shim>, mut request: Request, next: Next) -> Response {
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
    let needed = Role::for_route(request.method(), request.uri().path());
    if token.role < needed {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorKind::PermissionDenied,
            format!(
                "the token `{}` has the role {}; {} {} needs {}",
                token.name,
                token.role.as_str(),
                request.method(),
                request.uri().path(),
                needed.as_str()
            ),
        )
        .into_response();
    }
    request.extensions_mut().insert(Caller {
        actor: Actor {
            uid: crate::socket::owner_uid(),
            interface: format!("http (token {}, {})", token.name, token.role.as_str()),
        },
        role: token.role,
    });
    request.extensions_mut().insert(shim.metrics.clone());
    next.run(request).await
}

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

async fn not_found(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorKind::NotFound,
        format!("no route {} {}", request.method(), request.uri().path()),
    )
}

/// `GET /metrics`
async fn serve_metrics(
    State(ctx): State<Arc<Context>>,
    axum::Extension(metrics): axum::Extension<Arc<Metrics>>,
) -> Response {
    let text = metrics.render(ctx.store.as_ref(), &ctx.testenvs.list());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// `GET /openapi.json`
async fn openapi_document() -> Response {
    axum::Json(openapi::document()).into_response()
}
