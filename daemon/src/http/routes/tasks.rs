//! `GET /tasks` (and its search), `GET /tasks/{id}` (a task, or the workflow with that
//! id), a task's log page and dependants, and `POST /tasks/{id}/cancel` and `/retry`.

use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use orch_protocol::{ErrorKind, TaskFilter, TaskStatus};
use serde::Deserialize;

use super::{Answer, Caller, Ctx};
use crate::http::error::ApiError;
use crate::ops::logs::PageStart;
use crate::ops::{self, AppErrorKind};
use crate::redact;

/// How many tasks `GET /tasks` lists when it is given no limit.
const DEFAULT_LIMIT: usize = 1000;

/// The most tasks one `GET /tasks` lists (the next page: `before`).
const MAX_LIMIT: usize = 10_000;

/// The header naming where the next page of `GET /tasks` starts (its `before`), when
/// there may be one.
pub(super) const NEXT_BEFORE: &str = "x-next-before";

/// Filters of `GET /tasks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TasksQuery {
    status: Option<String>,
    label: Option<String>,
    limit: Option<usize>,
    before: Option<u64>,
    group: Option<String>,
    q: Option<String>,
}

/// `GET /tasks`: newest first, at most `?limit=` ([`DEFAULT_LIMIT`], at most
/// [`MAX_LIMIT`]); `?before=ID` pages on below the last id of a page (the
/// `x-next-before` header says where the next page starts). `?group=` and `?q=` (text)
/// search: at most [`ops::tasks::SCAN_BUDGET`] tasks are looked at per request.
pub async fn tasks(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    query: Result<Query<TasksQuery>, QueryRejection>,
) -> Answer {
    let Query(query) = query?;
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if limit > MAX_LIMIT {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorKind::BadRequest,
            format!("`limit`: at most {MAX_LIMIT} tasks a page (`before` pages on)"),
        ));
    }
    let search = ops::tasks::Search {
        group: query.group.filter(|g| !g.is_empty()),
        text: query.q.filter(|q| !q.trim().is_empty()),
    };
    if search.text.as_ref().is_some_and(|q| q.len() > 200) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorKind::BadRequest,
            "`q`: at most 200 bytes of text to look for",
        ));
    }
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
        limit: Some(limit),
        before: query.before,
    };
    let found = if search.group.is_none() && search.text.is_none() {
        let tasks = ops::tasks::list(&ctx, &filter)?;
        let next_before = (tasks.len() == limit)
            .then(|| tasks.last().map(|t| t.id))
            .flatten();
        ops::tasks::Found { tasks, next_before }
    } else {
        let searching = ctx.clone();
        tokio::task::spawn_blocking(move || ops::tasks::search(&searching, &filter, &search))
            .await
            .map_err(|e| internal(&e))??
    };
    let mut answer = Json(redact::into_role(caller.role, found.tasks)).into_response();
    if let Some(next) = found.next_before {
        answer.headers_mut().insert(NEXT_BEFORE, next.into());
    }
    Ok(answer)
}

/// A task of the daemon's that did not finish (a panic in a blocking read).
fn internal(error: &tokio::task::JoinError) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        ErrorKind::Internal,
        format!("the read failed: {error}"),
    )
}

/// `POST /tasks/{id}/cancel`
pub async fn cancel(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    id: Result<Path<u64>, PathRejection>,
) -> Answer {
    let Path(id) = id?;
    let task = ops::tasks::cancel(&ctx, caller.actor, id).await?;
    Ok(Json(redact::into_role(caller.role, task)).into_response())
}

/// `POST /tasks/{id}/retry`
pub async fn retry(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    id: Result<Path<u64>, PathRejection>,
) -> Answer {
    let Path(id) = id?;
    let task = ops::tasks::retry(&ctx, caller.actor, id).await?;
    Ok(Json(redact::into_role(caller.role, task)).into_response())
}

/// Where a page of a log (`GET /tasks/{id}/logs`, `GET /test/environments/{id}/logs`)
/// starts, and its size.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogQuery {
    offset: Option<u64>,
    limit: Option<usize>,
    tail: Option<u64>,
}

impl LogQuery {
    /// Whether the query asks for a page (any of its fields is given).
    pub(super) fn asks_for_a_page(&self) -> bool {
        self.offset.is_some() || self.limit.is_some() || self.tail.is_some()
    }

    /// Where the page starts (the log's start when neither `offset` nor `tail` is given)
    /// and how many bytes it may hold.
    pub(super) fn page(&self) -> Result<(PageStart, usize), ApiError> {
        let start = match (self.offset, self.tail) {
            (Some(_), Some(_)) => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    ErrorKind::BadRequest,
                    "`offset` and `tail`: give one of them (where the page starts)",
                ));
            }
            (_, Some(tail)) => PageStart::Tail(tail),
            (offset, None) => PageStart::At(offset.unwrap_or(0)),
        };
        Ok((start, self.limit.unwrap_or(usize::MAX)))
    }
}

/// `GET /tasks/{id}/logs`: a page of the log from `?offset=` (or its last `?tail=`
/// bytes), at most `?limit=` bytes (64 KiB).
pub async fn log(
    State(ctx): Ctx,
    id: Result<Path<u64>, PathRejection>,
    query: Result<Query<LogQuery>, QueryRejection>,
) -> Answer {
    let Path(id) = id?;
    let Query(query) = query?;
    let (start, limit) = query.page()?;
    let page = ops::logs::task_log_page(&ctx, id, start, limit)?;
    Ok(Json(page).into_response())
}

/// `GET /tasks/{id}/dependants`
pub async fn dependants(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    id: Result<Path<u64>, PathRejection>,
) -> Answer {
    let Path(id) = id?;
    let reading = ctx.clone();
    let found = tokio::task::spawn_blocking(move || ops::tasks::dependants(&reading, id))
        .await
        .map_err(|e| internal(&e))??;
    let found = orch_protocol::Dependants {
        tasks: redact::into_role(caller.role, found.tasks),
        ..found
    };
    Ok(Json(found).into_response())
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
