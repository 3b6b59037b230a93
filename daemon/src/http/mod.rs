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
use orch_protocol::{Actor, ErrorKind};

use crate::metrics::Metrics;
use crate::server::Context;
use auth::{Role, Tokens};
use error::ApiError;
use routes::Caller;

/// The largest request body accepted (bigger ones get 413).
const MAX_BODY: usize = 4 * 1024 * 1024;

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

/// Serves until `ctx.shutdown` is cancelled.
pub async fn serve(listener: tokio::net::TcpListener, app: Router, ctx: Arc<Context>) {
    let shutdown = ctx.shutdown.clone();
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
    {
        tracing::error!(error = %e, "the HTTP shim stopped");
    }
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
