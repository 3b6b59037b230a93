//! `EnvCreate`, `Envs`, `Env`, `EnvRun`, `EnvDelete` and `Topologies`: the test
//! environment service's operations (the REST shim maps them to `/test/environments...`).

use orch_protocol::{Actor, EnvId, EnvRequest, TestEnv, TopologiesReport};

use super::{AppError, Context};
use crate::testenv::topologies;

/// `EnvCreate`: answered once the environment is settled (created, ready, failed, or
/// deleted after an `auto_cleanup` run).
pub async fn create(ctx: &Context, actor: Actor, request: EnvRequest) -> Result<TestEnv, AppError> {
    Ok(ctx.testenvs.create(actor, request).await?)
}

/// `Envs`: every environment, newest first.
pub fn list(ctx: &Context) -> Vec<TestEnv> {
    ctx.testenvs.list()
}

/// `Env`.
pub fn get(ctx: &Context, id: EnvId) -> Result<TestEnv, AppError> {
    Ok(ctx.testenvs.get(id)?)
}

/// `EnvRun`: runs its tests.
pub async fn run(ctx: &Context, actor: Actor, id: EnvId) -> Result<TestEnv, AppError> {
    Ok(ctx.testenvs.run(actor, id).await?)
}

/// `EnvDelete`: removes its containers and network.
pub async fn delete(ctx: &Context, actor: Actor, id: EnvId) -> Result<TestEnv, AppError> {
    Ok(ctx.testenvs.delete(actor, id).await?)
}

/// `Topologies`: the cluster topologies test environments can be made from.
pub fn topologies(ctx: &Context) -> TopologiesReport {
    topologies::load(&ctx.modules_dir)
}
