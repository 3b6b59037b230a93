//! The HTTP adapter (`--port N`): the seed's REST paths, each a route of the operations
//! table ([`crate::ops::OPERATIONS`]) bound to its handler ([`routes`]), so that a route
//! outside the table cannot be served. Bound to loopback unless `--bind` says otherwise,
//! behind bearer tokens ([`auth`]) and the role each operation needs ([`guard`]). Errors
//! are JSON with the status that fits ([`error`]); the OpenAPI document is generated from
//! the same table ([`openapi`]). The web dashboard's files are served beside them
//! ([`ui`]), and read through the same routes.

pub mod auth;
pub mod error;
pub mod forwarded;
mod guard;
pub mod openapi;
mod routes;
pub mod ui;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::MethodRouter;
use orch_protocol::{ErrorKind, ErrorReply};
use tokio::sync::Semaphore;

use crate::activity::ActivityCounter;
use crate::metrics::Metrics;
use crate::ops::{self, Context, Operation, Route};
use crate::policy::Access;
use crate::server::limits::Limits;
use auth::Tokens;

/// The largest request body accepted (bigger ones get 413).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// How long a graceful stop lets HTTP answers under way finish before dropping them.
const DRAIN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// What the authentication layer needs.
#[derive(Clone)]
pub struct Shim {
    /// `--http-auth none`: every request is an admin.
    open: bool,
    tokens: Arc<Tokens>,
}

/// The routes of the operations table: those open to anyone as they are, the others
/// behind the token check, their operation's role check and the body's limits.
pub fn router(
    ctx: Arc<Context>,
    tokens: Arc<Tokens>,
    metrics: Arc<Metrics>,
    activity: Arc<ActivityCounter>,
    open: bool,
) -> Router {
    let shim = Shim {
        open,
        tokens: tokens.clone(),
    };
    let limits = ctx.limits.clone();
    // A standby serves only its part, forwards the changes to the leader, and refuses
    // the rest naming the leader.
    let serves = |op: &Operation| !ctx.standby || op.served_on_standby();
    let forwards = |op: &Operation| ctx.standby && ctx.relay.is_some() && op.forwarded();
    let public = table_router(|op, route| {
        (op.access == Access::Anyone && serves(op)).then(|| routes::bind(route.id, route.method))
    });
    let protected = table_router(|op, route| {
        let handler = if serves(op) {
            routes::bind(route.id, route.method)
        } else if forwards(op) {
            axum::routing::on(routes::filter(route.method), forwarded::forward)
        } else {
            return None;
        };
        (op.access != Access::Anyone).then(|| {
            handler
                .route_layer(from_fn_with_state(limits.clone(), guard::buffer_body))
                .route_layer(from_fn_with_state(op.access, guard::authorize))
        })
    })
    .layer(axum::Extension(tokens))
    .layer(axum::Extension(metrics))
    .layer(axum::Extension(activity))
    .layer(from_fn_with_state(shim, guard::authenticate));
    // The dashboard's files hold no data: served to anyone, like /health.
    let routed = public.merge(protected).merge(ui::router());
    let routed = if ctx.standby {
        let standby = ctx.clone();
        routed.fallback(move || std::future::ready(error::ApiError::from(standby.not_leader())))
    } else {
        routed.fallback(guard::not_found)
    };
    routed
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(ctx)
}

/// A router of the table's routes that `bind` gives a handler (the only way a route is
/// added).
fn table_router<S: Clone + Send + Sync + 'static>(
    bind: impl Fn(&Operation, &Route) -> Option<MethodRouter<S>>,
) -> Router<S> {
    ops::routes().fold(Router::new(), |router, (op, route)| match bind(op, route) {
        Some(handler) => router.route(route.path, handler),
        None => router,
    })
}

/// Serves until `ctx.shutdown` is cancelled, at most `--max-http-connections` at once
/// (past it a client gets a 503), each held to the header read timeout; then waits for
/// the open connections to finish their answers.
pub async fn serve(listener: tokio::net::TcpListener, app: Router, ctx: Arc<Context>) {
    serve_until(&listener, app, ctx.limits.clone(), ctx.shutdown.clone()).await;
}

/// Serves `app` on `listener` until `until` is cancelled, then lets the answers under way
/// finish (for a while); the listener stays open for whoever serves next.
pub async fn serve_until(
    listener: &tokio::net::TcpListener,
    app: Router,
    limits: Arc<Limits>,
    until: tokio_util::sync::CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(limits.max_http_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.read_timeout);
    crate::server::limits::accept_until(
        listener,
        until.clone(),
        slots.clone(),
        "HTTP",
        |stream| serve_connection(http.clone(), stream, app.clone(), until.clone()),
        |stream| refuse(stream, &limits),
    )
    .await;
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

/// Binds the shim's listener.
pub async fn bind(address: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {address}: {e}")))
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    use super::*;

    async fn call(router: &Router, method: &str, path: &str) -> (StatusCode, String) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty());
        let answer = router.clone().oneshot(request.unwrap()).await.unwrap();
        let status = answer.status();
        let body = answer.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// Built the way [`router`] is, each route answering with its id: every route of the
    /// table reaches its own handler, another method on a table path is 405, any other
    /// path 404, so the router serves exactly the table.
    #[tokio::test]
    async fn the_router_serves_exactly_the_routes_of_the_table() {
        let router: Router = table_router(|_, route| {
            let id = format!("{:?}", route.id);
            let answer = move || {
                let id = id.clone();
                async move { id }
            };
            Some(axum::routing::on(routes::filter(route.method), answer))
        });
        for (_, route) in ops::routes() {
            let path = route.path.replace("{id}", "1");
            let expected = (StatusCode::OK, format!("{:?}", route.id));
            let method = route.method.as_str().to_ascii_uppercase();
            assert_eq!(call(&router, &method, &path).await, expected);
            if route.method == ops::Method::Get {
                assert_eq!(call(&router, "HEAD", &path).await.0, StatusCode::OK);
            }
        }
        for (_, route) in ops::routes() {
            let path = route.path.replace("{id}", "1");
            for method in ["GET", "POST", "DELETE", "PUT", "PATCH"] {
                let served = ops::routes().any(|(_, r)| {
                    r.path == route.path && r.method.as_str().eq_ignore_ascii_case(method)
                });
                if !served {
                    let status = call(&router, method, &path).await.0;
                    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
                }
            }
        }
        for path in ["/", "/nowhere", "/tasks/1/steps", "/health/x", "/auth"] {
            assert_eq!(
                call(&router, "GET", path).await.0,
                StatusCode::NOT_FOUND,
                "{path}"
            );
        }
    }
}
