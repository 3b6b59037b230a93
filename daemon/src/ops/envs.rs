//! `EnvCreate`, `Envs`, `Env`, `EnvRun`, `EnvDelete` and `Topologies`: the test
//! environment service's operations (the REST shim maps them to `/test/environments...`).
//!
//! In a cluster the leader places a creation on a node whose container engine takes it
//! ([`crate::testenv::place`]) and sends the requests about an environment to its node,
//! which carries them out itself ([`Origin::Leader`]).

use orch_protocol::TopologiesReport;
use orch_protocol::{
    Actor, EnvFilter, EnvId, EnvRequest, ErrorKind, ErrorReply, Request, Response, TestEnv,
};

use super::{AppError, AppErrorKind, Context};
use crate::policy::Role;
use crate::testenv::{place, topologies};

/// Who asks for a change to a test environment.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Origin {
    /// A client, with its role: in a cluster, the leader sends it to the node that holds
    /// (or is to hold) the environment.
    Client(Role),
    /// The leader, which placed the environment on this node: carried out here.
    Leader,
}

/// `EnvCreate`: answered once the environment is settled (created, ready, failed, or
/// deleted after an `auto_cleanup` run).
pub async fn create(
    ctx: &Context,
    actor: Actor,
    origin: Origin,
    request: EnvRequest,
) -> Result<TestEnv, AppError> {
    if let Some((node, role)) = placement(ctx, origin).await {
        let request = Request::EnvCreate { env: request };
        return Ok(on_node(ctx, &node, &actor, role, &request).await?);
    }
    Ok(ctx.testenvs.create(actor, request).await?)
}

/// `Envs`: the environments `filter` passes, newest first (a page of at most its limit).
pub fn list(ctx: &Context, filter: &EnvFilter) -> Result<Vec<TestEnv>, AppError> {
    if filter
        .limit
        .is_some_and(|n| n == 0 || n > EnvFilter::MAX_LIMIT)
    {
        return Err(AppError::field(
            AppErrorKind::Invalid,
            "limit",
            format!(
                "a list gives 1 to {} test environments at a time",
                EnvFilter::MAX_LIMIT
            ),
        ));
    }
    Ok(ctx.testenvs.list(filter))
}

/// `Env`.
pub fn get(ctx: &Context, id: EnvId) -> Result<TestEnv, AppError> {
    Ok(ctx.testenvs.get(id)?)
}

/// `EnvRun`: runs its tests.
pub async fn run(
    ctx: &Context,
    actor: Actor,
    origin: Origin,
    id: EnvId,
) -> Result<TestEnv, AppError> {
    if let Some((node, role)) = elsewhere(ctx, origin, id)? {
        return Ok(on_node(ctx, &node, &actor, role, &Request::EnvRun { id }).await?);
    }
    Ok(ctx.testenvs.run(actor, id).await?)
}

/// `EnvDelete`: removes its containers and network.
pub async fn delete(
    ctx: &Context,
    actor: Actor,
    origin: Origin,
    id: EnvId,
) -> Result<TestEnv, AppError> {
    if let Some((node, role)) = elsewhere(ctx, origin, id)? {
        return Ok(on_node(ctx, &node, &actor, role, &Request::EnvDelete { id }).await?);
    }
    Ok(ctx.testenvs.delete(actor, id).await?)
}

/// The other node of the cluster whose container engine holds environment `id`, when
/// a client asks this one.
pub fn holder(ctx: &Context, id: EnvId) -> Result<Option<String>, AppError> {
    let env = ctx.testenvs.get(id)?;
    let here = ctx.testenvs.node();
    Ok(env
        .node
        .filter(|n| ctx.relay.is_some() && Some(n.as_str()) != here))
}

/// `Topologies`: the cluster topologies test environments can be made from.
pub fn topologies(ctx: &Context) -> TopologiesReport {
    topologies::load(&ctx.modules_dir)
}

/// The node a client's new environment goes to, when it is not this one.
async fn placement(ctx: &Context, origin: Origin) -> Option<(String, Role)> {
    let Origin::Client(role) = origin else {
        return None;
    };
    let (membership, me) = (ctx.cluster.clone()?, ctx.testenvs.node()?.to_string());
    let view = tokio::task::spawn_blocking(move || membership.view())
        .await
        .ok()?
        .inspect_err(|e| tracing::warn!(error = %e, "cannot read the cluster's nodes: the test environment stays here"))
        .ok()?;
    let node = place::choose(&view.nodes, &me, &ctx.testenvs.alive());
    (node != me).then_some((node, role))
}

/// The node that holds environment `id`, when a client asks for it here.
fn elsewhere(ctx: &Context, origin: Origin, id: EnvId) -> Result<Option<(String, Role)>, AppError> {
    let Origin::Client(role) = origin else {
        return Ok(None);
    };
    Ok(holder(ctx, id)?.map(|node| (node, role)))
}

/// Sends `request` from `actor`, who has `role`, to node `node` and returns the
/// environment it answers with.
async fn on_node(
    ctx: &Context,
    node: &str,
    actor: &Actor,
    role: Role,
    request: &Request,
) -> Result<TestEnv, ErrorReply> {
    let relay = ctx.relay.as_ref().ok_or_else(|| {
        ErrorReply::new(
            ErrorKind::Internal,
            "a test environment's node without a cluster",
        )
    })?;
    match relay.place(node, actor, role, request).await? {
        Response::Env(env) => Ok(*env),
        Response::Error(reply) => Err(reply),
        other => Err(ErrorReply::new(
            ErrorKind::Internal,
            format!("node {node} answered with {other:?}, not a test environment"),
        )),
    }
}
