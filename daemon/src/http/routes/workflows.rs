//! `POST /workflows/{servers,taskserv,cluster}/create` and
//! `POST /extensions/taskservs/install`: a workflow submission, answered with the
//! workflow (201, with `task_id`) or, in check mode, its plan (200).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use orch_protocol::{
    ClusterRequest, ServersRequest, TaskservRequest, WorkflowRequest, WorkflowSubmitted,
};
use serde_json::json;

use super::{Answer, Caller, Ctx};
use crate::ops::{self, Context};
use crate::policy::Submitter;

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
