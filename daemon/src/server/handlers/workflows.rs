//! `Workflows` and `Workflow`: read workflows, with their tasks' status, from the store.

use orch_protocol::{ErrorReply, Response, Workflow, WorkflowId, WorkflowView};

use super::store_error;
use crate::engine::{no_such_workflow, view_tasks};
use crate::server::Context;

/// How many workflows `Workflows` returns when no limit is given.
const DEFAULT_LIMIT: usize = 100;

/// `Workflows`: the newest first.
pub fn list(ctx: &Context, limit: Option<usize>) -> Result<Response, ErrorReply> {
    let workflows = ctx
        .store
        .workflows(limit.unwrap_or(DEFAULT_LIMIT))
        .map_err(store_error)?;
    let workflows = workflows.into_iter().map(|w| with_tasks(ctx, w)).collect();
    Ok(Response::Workflows { workflows })
}

/// `Workflow`.
pub fn get(ctx: &Context, id: WorkflowId) -> Result<Response, ErrorReply> {
    Ok(Response::Workflow(Box::new(stored_view(ctx, id)?)))
}

/// Workflow `id` as stored, with its tasks' status.
pub fn stored_view(ctx: &Context, id: WorkflowId) -> Result<WorkflowView, ErrorReply> {
    let workflow = ctx
        .store
        .workflow(id)
        .map_err(store_error)?
        .ok_or_else(|| no_such_workflow(id))?;
    Ok(with_tasks(ctx, workflow))
}

fn with_tasks(ctx: &Context, workflow: Workflow) -> WorkflowView {
    let tasks = view_tasks(&workflow, |t| {
        ctx.store.get(t).ok().flatten().map(|t| t.state.status())
    });
    WorkflowView { workflow, tasks }
}
