//! `EnvCreate`, `Envs`, `Env`, `EnvRun`, `EnvDelete` and `Topologies`: the test
//! environment service's operations (the REST shim maps them to `/test/environments...`).

use orch_protocol::{Actor, EnvId, EnvRequest, ErrorReply, Response};

use crate::server::Context;
use crate::testenv::topologies;

/// `EnvCreate`: answered once the environment is settled (created, ready, failed, or
/// deleted after an `auto_cleanup` run).
pub async fn create(
    ctx: &Context,
    actor: Actor,
    request: EnvRequest,
) -> Result<Response, ErrorReply> {
    Ok(Response::Env(Box::new(
        ctx.testenvs.create(actor, request).await?,
    )))
}

/// `Envs`.
pub fn list(ctx: &Context) -> Response {
    Response::Envs {
        envs: ctx.testenvs.list(),
    }
}

/// `Env`.
pub fn get(ctx: &Context, id: EnvId) -> Result<Response, ErrorReply> {
    Ok(Response::Env(Box::new(ctx.testenvs.get(id)?)))
}

/// `EnvRun`.
pub async fn run(ctx: &Context, actor: Actor, id: EnvId) -> Result<Response, ErrorReply> {
    Ok(Response::Env(Box::new(ctx.testenvs.run(actor, id).await?)))
}

/// `EnvDelete`.
pub async fn delete(ctx: &Context, actor: Actor, id: EnvId) -> Result<Response, ErrorReply> {
    Ok(Response::Env(Box::new(
        ctx.testenvs.delete(actor, id).await?,
    )))
}

/// `Topologies`.
pub fn topologies(ctx: &Context) -> Response {
    Response::Topologies(Box::new(topologies::load(&ctx.modules_dir)))
}
