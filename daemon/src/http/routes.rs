//! The routes: each calls the socket interface's handler for the same request, so no
//! operation has a second implementation.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response as HttpResponse};
use futures_util::Stream;
use orch_protocol::{
    Actor, AuditFilter, ClusterRequest, EnvRequest, ErrorKind, ErrorReply, Response,
    ServersRequest, TaskFilter, TaskStatus, TaskservRequest, WorkflowRequest, WorkflowSubmitted,
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::{Role, TokenError, TokenSummary, Tokens};
use super::error::ApiError;
use crate::redact;
use crate::server::Context;
use crate::server::handlers as h;

/// Who is asking (set by the authentication layer).
#[derive(Clone)]
pub struct Caller {
    /// For the audit log.
    pub actor: Actor,
    /// What the token may do (and see: secrets are redacted below admin).
    pub role: Role,
}

type Ctx = State<Arc<Context>>;
type Answer = Result<HttpResponse, ApiError>;

/// The payload of a handler's answer, as JSON.
fn payload(response: Response) -> Value {
    let value = match response {
        Response::Health(report) => serde_json::to_value(report),
        Response::Task { task } => serde_json::to_value(task),
        Response::Tasks { tasks, .. } => serde_json::to_value(tasks),
        Response::Workflow(view) => serde_json::to_value(view),
        Response::Workflows { workflows, .. } => serde_json::to_value(workflows),
        Response::WorkflowSummary(summary) => serde_json::to_value(summary),
        Response::Plan(plan) => serde_json::to_value(plan),
        Response::Env(env) => serde_json::to_value(env),
        Response::Envs { envs } => serde_json::to_value(envs),
        Response::Audit { entries } => serde_json::to_value(entries),
        Response::AuditReport(report) => serde_json::to_value(report),
        Response::Extensions(report) => serde_json::to_value(report),
        Response::Topologies(report) => serde_json::to_value(report),
        other => serde_json::to_value(other),
    };
    value.unwrap_or_default()
}

fn ok(response: Response) -> Answer {
    Ok(Json(payload(response)).into_response())
}

/// A record answer as `caller` may see it (secrets redacted below admin).
fn ok_for(caller: &Caller, response: Response) -> Answer {
    ok(redact::into_role(caller.role, response))
}

fn created_for(caller: &Caller, response: Response) -> Answer {
    let response = redact::into_role(caller.role, response);
    Ok((StatusCode::CREATED, Json(payload(response))).into_response())
}

/// `GET /health`
pub async fn health(State(ctx): Ctx) -> Answer {
    ok(h::health::handle(&ctx)?)
}

/// Filters of `GET /tasks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TasksQuery {
    status: Option<String>,
    label: Option<String>,
    limit: Option<usize>,
}

/// `GET /tasks`
pub async fn tasks(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    query: Result<Query<TasksQuery>, QueryRejection>,
) -> Answer {
    let Query(query) = query?;
    let mut status = Vec::new();
    for name in query.status.iter().flat_map(|s| s.split(',')) {
        status.push(TaskStatus::parse(name).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorKind::BadRequest,
                format!("`{name}` is not a task status"),
            )
        })?);
    }
    let filter = TaskFilter {
        status,
        label: query.label,
        limit: query.limit,
    };
    let tasks = redact::into_role(caller.role, h::list::handle(&ctx, &filter)?);
    Ok(Json(serde_json::to_value(tasks).unwrap_or_default()).into_response())
}

/// The page of a workflow's steps `GET /tasks/{id}` shows.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepsQuery {
    offset: Option<u64>,
    limit: Option<usize>,
}

/// `GET /tasks/{id}`: a task, or the workflow with that id (workflow ids come from the
/// same sequence, so the `task_id` a workflow submission answers with works here): its
/// summary and the page of its steps from `?offset=` (at most `?limit=`).
pub async fn task(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    id: Result<Path<u64>, PathRejection>,
    query: Result<Query<StepsQuery>, QueryRejection>,
) -> Answer {
    let Path(id) = id?;
    let Query(page) = query?;
    match h::get::handle(&ctx, id) {
        Ok(response) => ok_for(&caller, response),
        Err(e) if e.kind == ErrorKind::NotFound => {
            match h::workflows::get(&ctx, id, page.offset.unwrap_or(0), page.limit) {
                Ok(view) => Ok(Json(redact::into_role(caller.role, view)).into_response()),
                Err(_) => Err(e.into()),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// A workflow submission's answer: the workflow (201) with `task_id`, or its plan (200).
async fn submit(ctx: &Context, caller: Caller, request: WorkflowRequest) -> Answer {
    // Over HTTP the workspace is always the daemon's (a token is not its owner).
    let confined = h::workflow_submit::Submitter::Confined;
    match h::workflow_submit::submit(ctx, caller.actor, confined, request).await? {
        WorkflowSubmitted::Planned(plan) => {
            Ok(Json(json!({"check_mode": true, "plan": plan})).into_response())
        }
        WorkflowSubmitted::Created(summary) => {
            let body = json!({
                "task_id": summary.id,
                "status": summary.state.status().as_str(),
                "workflow": summary,
            });
            Ok((StatusCode::CREATED, Json(body)).into_response())
        }
    }
}

/// `POST /workflows/servers/create`
pub async fn servers_create(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    body: Result<Json<ServersRequest>, JsonRejection>,
) -> Answer {
    let Json(request) = body?;
    submit(&ctx, caller, WorkflowRequest::Servers(request)).await
}

/// `POST /workflows/taskserv/create` and `POST /extensions/taskservs/install`
pub async fn taskserv_create(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    body: Result<Json<TaskservRequest>, JsonRejection>,
) -> Answer {
    let Json(request) = body?;
    submit(&ctx, caller, WorkflowRequest::Taskserv(request)).await
}

/// `POST /workflows/cluster/create`
pub async fn cluster_create(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    body: Result<Json<ClusterRequest>, JsonRejection>,
) -> Answer {
    let Json(request) = body?;
    submit(&ctx, caller, WorkflowRequest::Cluster(request)).await
}

/// `POST /test/environments/create`
pub async fn env_create(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    body: Result<Json<EnvRequest>, JsonRejection>,
) -> Answer {
    let Json(request) = body?;
    let actor = caller.actor.clone();
    created_for(&caller, h::test_envs::create(&ctx, actor, request).await?)
}

/// `GET /test/environments`
pub async fn envs(State(ctx): Ctx, Extension(caller): Extension<Caller>) -> Answer {
    ok_for(&caller, h::test_envs::list(&ctx))
}

/// `GET /test/environments/{id}`
pub async fn env(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    id: Result<Path<u64>, PathRejection>,
) -> Answer {
    let Path(id) = id?;
    ok_for(&caller, h::test_envs::get(&ctx, id)?)
}

/// `POST /test/environments/{id}/run`
pub async fn env_run(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    id: Result<Path<u64>, PathRejection>,
) -> Answer {
    let Path(id) = id?;
    let actor = caller.actor.clone();
    ok_for(&caller, h::test_envs::run(&ctx, actor, id).await?)
}

/// `DELETE /test/environments/{id}`
pub async fn env_delete(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    id: Result<Path<u64>, PathRejection>,
) -> Answer {
    let Path(id) = id?;
    let actor = caller.actor.clone();
    ok_for(&caller, h::test_envs::delete(&ctx, actor, id).await?)
}

/// `GET /test/environments/{id}/logs`: the environment's log as text.
pub async fn env_logs(State(ctx): Ctx, id: Result<Path<u64>, PathRejection>) -> Answer {
    let Path(id) = id?;
    ctx.testenvs.get(id)?;
    let text = std::fs::read_to_string(ctx.testenvs.log_path(id)).unwrap_or_default();
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

/// One part of the extensions registry (`providers`, `taskservs` or `clusters`), with
/// the manifests that could not be read.
fn extensions(ctx: &Context, part: &str) -> Answer {
    let report = serde_json::to_value(h::extensions::report(ctx)).unwrap_or_default();
    Ok(Json(json!({part: report[part], "problems": report["problems"]})).into_response())
}

/// `GET /extensions/providers`
pub async fn providers(State(ctx): Ctx) -> Answer {
    extensions(&ctx, "providers")
}

/// `GET /extensions/taskservs`
pub async fn taskservs(State(ctx): Ctx) -> Answer {
    extensions(&ctx, "taskservs")
}

/// `GET /extensions/clusters`
pub async fn clusters(State(ctx): Ctx) -> Answer {
    extensions(&ctx, "clusters")
}

/// Filters of `GET /audit`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    action: Option<String>,
    limit: Option<usize>,
}

/// `GET /audit`
pub async fn audit(State(ctx): Ctx, query: Result<Query<AuditQuery>, QueryRejection>) -> Answer {
    let Query(query) = query?;
    ok(h::audit::list(
        &ctx,
        &AuditFilter {
            action: query.action,
            limit: query.limit,
        },
    )?)
}

/// `GET /audit/verify`
pub async fn audit_verify(State(ctx): Ctx) -> Answer {
    ok(h::audit::verify(&ctx)?)
}

/// Filters of `GET /events`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    since: Option<u64>,
    task: Option<u64>,
    workflow: Option<u64>,
}

/// `GET /events`: server-sent events from the event bus (replaying the log after
/// `since` first), optionally only one task's or one workflow's.
pub async fn events(
    State(ctx): Ctx,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let Query(query) = query?;
    let mut live = ctx.bus.subscribe();
    let mut last = match query.since {
        Some(seq) => seq,
        None => ctx.store.last_event_seq().map_err(|e| {
            ApiError::from(orch_protocol::ErrorReply::new(
                ErrorKind::Internal,
                e.to_string(),
            ))
        })?,
    };
    let wanted = move |event: &orch_protocol::Event| {
        query.task.is_none_or(|t| t == event.task)
            && query.workflow.is_none_or(|w| Some(w) == event.workflow)
    };
    let store = ctx.store.clone();
    let shutdown = ctx.shutdown.clone();
    let stream = async_stream_events(move |tx| async move {
        // Replay the log, then follow the bus; a lagging subscriber re-reads the log.
        loop {
            loop {
                let Ok(page) = store.events_after(last, 1024) else {
                    return;
                };
                if page.is_empty() {
                    break;
                }
                for event in page {
                    last = event.seq;
                    if wanted(&event) && tx.send(sse(&event)).await.is_err() {
                        return;
                    }
                }
            }
            loop {
                // The stream ends when the daemon stops (or the client leaves), so a
                // graceful shutdown does not wait for open event streams.
                let received = tokio::select! {
                    received = live.recv() => received,
                    () = shutdown.cancelled() => return,
                    () = tx.closed() => return,
                };
                match received {
                    Ok(event) if event.seq > last => {
                        last = event.seq;
                        if wanted(&event) && tx.send(sse(&event)).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => break,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

fn sse(event: &orch_protocol::Event) -> SseEvent {
    SseEvent::default()
        .id(event.seq.to_string())
        .event(event.kind.name())
        .data(serde_json::to_string(event).unwrap_or_default())
}

/// A stream fed by a task through a channel (the task ends when the client leaves).
fn async_stream_events<F, Fut>(produce: F) -> impl Stream<Item = Result<SseEvent, Infallible>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<SseEvent>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(256);
    tokio::spawn(produce(tx));
    futures_util::stream::unfold(
        rx,
        |mut rx| async move { rx.recv().await.map(|e| (Ok(e), rx)) },
    )
}

/// A new token (`POST /auth/tokens`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    name: String,
    role: Role,
}

/// `GET /auth/tokens`: every token's id, name, role and creation time, never a secret.
pub async fn tokens(Extension(tokens): Extension<Arc<Tokens>>) -> Answer {
    Ok(Json(tokens.list()).into_response())
}

/// `POST /auth/tokens`: makes a token (its secret is shown once).
pub async fn token_create(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    Extension(tokens): Extension<Arc<Tokens>>,
    body: Result<Json<NewToken>, JsonRejection>,
) -> Answer {
    let Json(request) = body?;
    if request.name.trim().is_empty() {
        return Err(ApiError::from(ErrorReply::field(
            ErrorKind::BadRequest,
            "name",
            "`name` is empty",
        )));
    }
    let token = tokens
        .create(&request.name, request.role)
        .map_err(token_error)?;
    let summary = token.summary();
    audit_token(&ctx, caller, "token_create", &summary).await?;
    let mut body = serde_json::to_value(&summary).unwrap_or_default();
    body["token"] = Value::String(token.token);
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `DELETE /auth/tokens/{id}`: revokes a token at once (refused for the last admin token).
pub async fn token_revoke(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    Extension(tokens): Extension<Arc<Tokens>>,
    Path(id): Path<String>,
) -> Answer {
    let summary = tokens.revoke(&id).map_err(token_error)?.summary();
    audit_token(&ctx, caller, "token_revoke", &summary).await?;
    Ok(Json(summary).into_response())
}

/// Records a token change in the audit log (the token's id, name and role; no secret).
async fn audit_token(
    ctx: &Context,
    caller: Caller,
    action: &'static str,
    token: &TokenSummary,
) -> Result<(), ApiError> {
    let record = crate::audit::AuditRecord::new(
        caller.actor,
        action,
        json!({"id": token.id, "name": token.name, "role": token.role}),
        Ok(format!(
            "token {} ({}, {})",
            token.name,
            token.id,
            token.role.as_str()
        )),
    );
    ctx.engine
        .request(|reply| crate::engine::Command::Audit { record, reply })
        .await?;
    Ok(())
}

/// A token failure as an error answer naming the field.
fn token_error(e: TokenError) -> ApiError {
    let kind = match &e {
        TokenError::NotFound(_) => ErrorKind::NotFound,
        TokenError::LastAdmin(_) => ErrorKind::Conflict,
        TokenError::Random(_) | TokenError::Io(_) => ErrorKind::Internal,
    };
    let reply = match &e {
        TokenError::NotFound(_) | TokenError::LastAdmin(_) => {
            ErrorReply::field(kind, "id", e.to_string())
        }
        _ => ErrorReply::new(kind, e.to_string()),
    };
    reply.into()
}
