//! `/health`, `/openapi.json`, `/metrics`, `/activity`, `/extensions/*`, `/queue`,
//! `/schedules` and `/audit*`.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::header;
use axum::response::IntoResponse;
use orch_protocol::AuditFilter;
use serde::Deserialize;
use serde_json::json;

use super::{Answer, Caller, Ctx};
use crate::activity::ActivityCounter;
use crate::metrics::Metrics;
use crate::ops::{self, Context};

/// `GET /health`
pub async fn health(State(ctx): Ctx) -> Answer {
    Ok(Json(ops::daemon::health(&ctx)?).into_response())
}

/// `GET /cluster`
pub async fn cluster(State(ctx): Ctx) -> Answer {
    Ok(Json(ops::daemon::cluster(&ctx)?).into_response())
}

/// `GET /queue`
pub async fn queue(State(ctx): Ctx) -> Answer {
    Ok(Json(ops::queue::view(&ctx)?).into_response())
}

/// `POST /queue`: a change of the queue's controls.
pub async fn queue_change(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    body: Result<Json<orch_protocol::QueueChange>, JsonRejection>,
) -> Answer {
    let Json(change) = body?;
    Ok(Json(ops::queue::change(&ctx, caller.actor, change).await?).into_response())
}

/// `POST /schedules`: a new schedule (a confined submitter's workflow stays in the
/// daemon's workspace).
pub async fn schedule_add(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    body: Result<Json<orch_protocol::ScheduleSpec>, JsonRejection>,
) -> Answer {
    let Json(spec) = body?;
    let submitter = crate::policy::Submitter::Confined;
    let schedule = ops::schedules::add(&ctx, caller.actor, submitter, spec).await?;
    let schedule = crate::redact::into_role(caller.role, schedule);
    Ok((axum::http::StatusCode::CREATED, Json(schedule)).into_response())
}

/// The query of `GET /schedules`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulesQuery {
    upcoming: Option<u32>,
}

/// `GET /schedules`
pub async fn schedules(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    query: Result<Query<SchedulesQuery>, QueryRejection>,
) -> Answer {
    let Query(query) = query?;
    let schedules = ops::schedules::list(&ctx, query.upcoming)?;
    Ok(Json(crate::redact::into_role(caller.role, schedules)).into_response())
}

/// `DELETE /schedules/{name}`
pub async fn schedule_remove(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Answer {
    let change = orch_protocol::ScheduleChange::Remove;
    let schedule = ops::schedules::change(&ctx, caller.actor, name, change).await?;
    Ok(Json(crate::redact::into_role(caller.role, schedule)).into_response())
}

/// `GET /openapi.json`
pub async fn openapi() -> Answer {
    Ok(Json(crate::http::openapi::document()).into_response())
}

/// `GET /metrics`
pub async fn metrics(Extension(metrics): Extension<Arc<Metrics>>) -> Answer {
    let text = metrics.render();
    Ok(([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response())
}

/// One part of the extensions registry (`providers`, `taskservs` or `clusters`), with
/// the manifests that could not be read.
fn extensions(ctx: &Context, part: &str) -> Answer {
    let report = serde_json::to_value(ops::daemon::extensions(ctx)).unwrap_or_default();
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
    before: Option<u64>,
    uid: Option<u32>,
    ok: Option<bool>,
}

/// `GET /audit`
pub async fn audit(State(ctx): Ctx, query: Result<Query<AuditQuery>, QueryRejection>) -> Answer {
    let Query(query) = query?;
    let filter = AuditFilter {
        action: query.action,
        limit: query.limit,
        before: query.before,
        uid: query.uid,
        ok: query.ok,
    };
    Ok(Json(ops::audit::list(&ctx, &filter)?).into_response())
}

/// `GET /audit/verify`
pub async fn audit_verify(State(ctx): Ctx) -> Answer {
    Ok(Json(ops::audit::verify(&ctx).await?).into_response())
}

/// `GET /audit/segments`
pub async fn audit_segments(State(ctx): Ctx) -> Answer {
    Ok(Json(ops::audit::segments(&ctx)?).into_response())
}

/// `GET /activity`: the last hour, minute by minute.
pub async fn activity(Extension(activity): Extension<Arc<ActivityCounter>>) -> Answer {
    Ok(Json(activity.view(chrono::Utc::now())).into_response())
}
