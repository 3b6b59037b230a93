//! `/test/environments...`: create, list, show, run, delete, and the log as text; and
//! `/test/topologies`, what environments are created from.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use orch_protocol::{EnvFilter, EnvRequest, EnvState};
use serde::Deserialize;

use super::tasks::LogQuery;
use super::{Answer, Caller, Ctx};
use crate::ops;
use crate::ops::envs::Origin;
use crate::redact;

/// `POST /test/environments/create`: answered (201) once the environment is settled.
pub async fn create(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    body: Result<Json<EnvRequest>, JsonRejection>,
) -> Answer {
    let Json(request) = body?;
    let env = ops::envs::create(&ctx, caller.actor, Origin::Client(caller.role), request).await?;
    Ok((
        StatusCode::CREATED,
        Json(redact::into_role(caller.role, env)),
    )
        .into_response())
}

/// Filters of `GET /test/environments`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvsQuery {
    before: Option<u64>,
    limit: Option<usize>,
    alive: Option<bool>,
}

/// `GET /test/environments`: newest first, at most `?limit=` (1000 by default, at most
/// 10,000), below `?before=ID` (the `x-next-before` header names the next page when there
/// may be one); `?alive=true`: only those not deleted.
pub async fn list(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    query: Result<Query<EnvsQuery>, QueryRejection>,
) -> Answer {
    let Query(query) = query?;
    let filter = EnvFilter {
        before: query.before,
        limit: query.limit,
        alive: query.alive.unwrap_or(false),
    };
    let envs = ops::envs::list(&ctx, &filter)?;
    let limit = filter.limit.unwrap_or(EnvFilter::DEFAULT_LIMIT);
    let next_before = (envs.len() == limit)
        .then(|| envs.last().map(|e| e.id))
        .flatten();
    let mut answer = Json(redact::into_role(caller.role, envs)).into_response();
    if let Some(next) = next_before {
        answer
            .headers_mut()
            .insert(super::tasks::NEXT_BEFORE, next.into());
    }
    Ok(answer)
}

/// `GET /test/environments/{id}`
pub async fn get(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    id: Result<Path<u64>, PathRejection>,
) -> Answer {
    let Path(id) = id?;
    let env = ops::envs::get(&ctx, id)?;
    Ok(Json(redact::into_role(caller.role, env)).into_response())
}

/// `POST /test/environments/{id}/run`
pub async fn run(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    id: Result<Path<u64>, PathRejection>,
) -> Answer {
    let Path(id) = id?;
    let env = ops::envs::run(&ctx, caller.actor, Origin::Client(caller.role), id).await?;
    Ok(Json(redact::into_role(caller.role, env)).into_response())
}

/// `DELETE /test/environments/{id}`
pub async fn delete(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    id: Result<Path<u64>, PathRejection>,
) -> Answer {
    let Path(id) = id?;
    let env = ops::envs::delete(&ctx, caller.actor, Origin::Client(caller.role), id).await?;
    Ok(Json(redact::into_role(caller.role, env)).into_response())
}

/// `GET /test/environments/{id}/logs`: the environment's own log as text (asked of the
/// node that holds it, in a cluster); with `?offset=`, `?tail=` or `?limit=`, a page of
/// it as JSON (as `GET /tasks/{id}/logs` gives: at most 64 KiB).
pub async fn logs(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    id: Result<Path<u64>, PathRejection>,
    query: Result<Query<LogQuery>, QueryRejection>,
) -> Answer {
    let Path(id) = id?;
    let Query(query) = query?;
    let page = query.asks_for_a_page().then(|| query.page()).transpose()?;
    ops::envs::get(&ctx, id)?;
    if let Some(node) = ops::envs::holder(&ctx, id)?
        && let Some(relay) = &ctx.relay
    {
        let text = relay
            .remote_log_text(&node, &caller.actor, caller.role, id)
            .await?;
        return Ok(match page {
            Some((start, limit)) => {
                // The node that holds it is the one at work on it: its state says whether
                // it is.
                let state = ops::envs::get(&ctx, id)?.state;
                let complete = !matches!(
                    state,
                    EnvState::Starting { .. }
                        | EnvState::Testing { .. }
                        | EnvState::Deleting { .. }
                );
                Json(ops::logs::text_page(&text, start, limit, complete)).into_response()
            }
            None => plain_text(text),
        });
    }
    Ok(match page {
        Some((start, limit)) => {
            Json(ops::logs::env_log_page(&ctx, id, start, limit)?).into_response()
        }
        None => plain_text(std::fs::read_to_string(ctx.testenvs.log_path(id)).unwrap_or_default()),
    })
}

fn plain_text(text: String) -> axum::response::Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

/// `GET /test/topologies`
pub async fn topologies(State(ctx): Ctx) -> Answer {
    Ok(Json(ops::envs::topologies(&ctx)).into_response())
}
