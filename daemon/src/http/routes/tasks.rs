//! `GET /tasks` and `GET /tasks/{id}` (a task, or the workflow with that id).

use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use orch_protocol::{ErrorKind, TaskFilter, TaskStatus};
use serde::Deserialize;

use super::{Answer, Caller, Ctx};
use crate::http::error::ApiError;
use crate::ops::{self, AppErrorKind};
use crate::redact;

/// Filters of `GET /tasks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TasksQuery {
    status: Option<String>,
    label: Option<String>,
    limit: Option<usize>,
    before: Option<u64>,
}

/// `GET /tasks`: newest first; `?before=ID` pages on below the last id of a page.
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
        before: query.before,
    };
    let tasks = redact::into_role(caller.role, ops::tasks::list(&ctx, &filter)?);
    Ok(Json(tasks).into_response())
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
    match ops::tasks::get(&ctx, id) {
        Ok(task) => Ok(Json(redact::into_role(caller.role, task)).into_response()),
        Err(e) if e.kind == AppErrorKind::NotFound => {
            match ops::workflows::get(&ctx, id, page.offset.unwrap_or(0), page.limit) {
                Ok(view) => Ok(Json(redact::into_role(caller.role, view)).into_response()),
                Err(_) => Err(e.into()),
            }
        }
        Err(e) => Err(e.into()),
    }
}
