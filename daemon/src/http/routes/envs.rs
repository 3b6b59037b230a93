//! `/test/environments...`: create, list, show, run, delete, and the log as text; and
//! `/test/topologies`, what environments are created from.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Extension, Path, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use orch_protocol::EnvRequest;

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

/// `GET /test/environments`
pub async fn list(State(ctx): Ctx, Extension(caller): Extension<Caller>) -> Answer {
    let envs = ops::envs::list(&ctx);
    Ok(Json(redact::into_role(caller.role, envs)).into_response())
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
/// node that holds it, in a cluster).
pub async fn logs(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    id: Result<Path<u64>, PathRejection>,
) -> Answer {
    let Path(id) = id?;
    ops::envs::get(&ctx, id)?;
    let text = match (ops::envs::holder(&ctx, id)?, &ctx.relay) {
        (Some(node), Some(relay)) => {
            relay
                .remote_log_text(&node, &caller.actor, caller.role, id)
                .await?
        }
        _ => std::fs::read_to_string(ctx.testenvs.log_path(id)).unwrap_or_default(),
    };
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
}

/// `GET /test/topologies`
pub async fn topologies(State(ctx): Ctx) -> Answer {
    Ok(Json(ops::envs::topologies(&ctx)).into_response())
}
