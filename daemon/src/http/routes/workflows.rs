//! `POST /workflows/{servers,taskserv,cluster}/create` and
//! `POST /extensions/taskservs/install`: a workflow submission, answered with the
//! workflow (201, with `task_id`) or, in check mode, its plan (200). `GET /workflows` and
//! `/workflows/{id}`, and a workflow's cancel, rollback and restart.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use orch_protocol::{
    ClusterRequest, ErrorKind, ServersRequest, TaskservRequest, WorkflowRequest, WorkflowSubmitted,
};
use serde::Deserialize;
use serde_json::json;

use super::{Answer, Caller, Ctx};
use crate::http::error::ApiError;
use crate::ops::{self, Context};
use crate::policy::Submitter;
use crate::redact;

/// Submits `request` for `caller`.
async fn submit(ctx: &Context, caller: Caller, request: WorkflowRequest) -> Answer {
    // Over HTTP the workspace is always the daemon's (a token is not its owner).
    let confined = Submitter::Confined;
    match ops::workflow_submit::submit(ctx, caller.actor, confined, request).await? {
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

/// Pages of `GET /workflows`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowsQuery {
    limit: Option<usize>,
    before: Option<u64>,
}

/// `GET /workflows`: the newest first, below `?before=`.
pub async fn list(State(ctx): Ctx, query: Result<Query<WorkflowsQuery>, QueryRejection>) -> Answer {
    let Query(query) = query?;
    if query.limit.is_some_and(|l| l > ops::workflows::MAX_LIMIT) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorKind::BadRequest,
            format!(
                "`limit`: at most {} workflows a page (`before` pages on)",
                ops::workflows::MAX_LIMIT
            ),
        ));
    }
    let summaries = ops::workflows::list(&ctx, query.limit, query.before)?;
    // A summary holds no request, so no secret.
    Ok(Json(summaries).into_response())
}

/// The page of steps `GET /workflows/{id}` shows.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepsQuery {
    offset: Option<u64>,
    limit: Option<usize>,
}

/// `GET /workflows/{id}`: the summary and the page of steps from `?offset=`.
pub async fn get(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    id: Result<Path<u64>, PathRejection>,
    query: Result<Query<StepsQuery>, QueryRejection>,
) -> Answer {
    let Path(id) = id?;
    let Query(page) = query?;
    let view = ops::workflows::get(&ctx, id, page.offset.unwrap_or(0), page.limit)?;
    Ok(Json(redact::into_role(caller.role, view)).into_response())
}

/// `POST /workflows/{id}/cancel`
pub async fn cancel(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    id: Result<Path<u64>, PathRejection>,
) -> Answer {
    let Path(id) = id?;
    let summary = ops::workflows::cancel(&ctx, caller.actor, id).await?;
    Ok(Json(summary).into_response())
}

/// `POST /workflows/{id}/rollback`
pub async fn rollback(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    id: Result<Path<u64>, PathRejection>,
) -> Answer {
    let Path(id) = id?;
    let summary = ops::workflows::rollback(&ctx, caller.actor, id).await?;
    Ok(Json(summary).into_response())
}

/// The body of `POST /workflows/{id}/restart`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowRestart {
    /// The step to start from (it and every step after it run again).
    pub step: String,
}

/// `POST /workflows/{id}/restart`: the new workflow (201).
pub async fn restart(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    id: Result<Path<u64>, PathRejection>,
    body: Result<Json<WorkflowRestart>, JsonRejection>,
) -> Answer {
    let Path(id) = id?;
    let Json(body) = body?;
    let summary = ops::workflows::restart(&ctx, caller.actor, id, &body.step).await?;
    Ok((StatusCode::CREATED, Json(summary)).into_response())
}
