//! `WorkflowCancel` and `WorkflowRollback`: answered once the change is durable.

use orch_protocol::{Actor, ErrorReply, Response, WorkflowId};

use crate::engine::Command;
use crate::server::Context;

/// `WorkflowCancel`.
pub async fn cancel(ctx: &Context, actor: Actor, id: WorkflowId) -> Result<Response, ErrorReply> {
    let summary = ctx
        .engine
        .request(|reply| Command::CancelWorkflow { actor, id, reply })
        .await?;
    Ok(Response::WorkflowSummary(Box::new(summary)))
}

/// `WorkflowRollback`.
pub async fn rollback(ctx: &Context, actor: Actor, id: WorkflowId) -> Result<Response, ErrorReply> {
    let summary = ctx
        .engine
        .request(|reply| Command::RollbackWorkflow { actor, id, reply })
        .await?;
    Ok(Response::WorkflowSummary(Box::new(summary)))
}
