//! `Workflows` and `Workflow`: read workflows from the store, as summaries (whose size
//! does not grow with their steps) and pages of steps; `WorkflowCancel`,
//! `WorkflowRollback` and `WorkflowRestart`, answered once the change is durable.

use std::collections::HashMap;

use orch_protocol::{
    Actor, TaskId, TaskStatus, Workflow, WorkflowId, WorkflowSummary, WorkflowView,
};

use super::{AppError, AppErrorKind, Context};
use crate::engine::Command;
use crate::workflows::restart;
use crate::workflows::views::{no_such_workflow, workflow_page, workflow_summary};

/// How many workflows `Workflows` returns when no limit is given.
const DEFAULT_LIMIT: usize = 100;

/// The most workflows one `Workflows` answers with.
pub const MAX_LIMIT: usize = 1000;

/// `Workflows`: the newest first (below `before`), as summaries.
pub fn list(
    ctx: &Context,
    limit: Option<usize>,
    before: Option<WorkflowId>,
) -> Result<Vec<WorkflowSummary>, AppError> {
    let limit = limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT);
    let workflows = ctx.store.workflows(before, limit)?;
    workflows
        .iter()
        .map(|w| {
            let statuses = stored_statuses(ctx, w)?;
            Ok(workflow_summary(w, |t| statuses.get(&t).copied()))
        })
        .collect()
}

/// `Workflow`: the summary and the page of steps from `offset`.
pub fn get(
    ctx: &Context,
    id: WorkflowId,
    offset: u64,
    limit: Option<usize>,
) -> Result<WorkflowView, AppError> {
    let workflow = stored(ctx, id)?;
    let statuses = stored_statuses(ctx, &workflow)?;
    Ok(workflow_page(
        &workflow,
        |t| statuses.get(&t).copied(),
        offset,
        limit,
    ))
}

/// Workflow `id`'s summary as stored.
pub fn stored_summary(ctx: &Context, id: WorkflowId) -> Result<WorkflowSummary, AppError> {
    let workflow = stored(ctx, id)?;
    let statuses = stored_statuses(ctx, &workflow)?;
    Ok(workflow_summary(&workflow, |t| statuses.get(&t).copied()))
}

/// Workflow `id`'s record.
fn stored(ctx: &Context, id: WorkflowId) -> Result<Workflow, AppError> {
    ctx.store
        .workflow(id)?
        .ok_or_else(|| no_such_workflow(id).into())
}

/// The committed status of the workflow's tasks (removed ones are absent), read from
/// the status index in two ranges: its steps' ids, and its compensations'.
fn stored_statuses(
    ctx: &Context,
    workflow: &Workflow,
) -> Result<HashMap<TaskId, TaskStatus>, AppError> {
    let steps = workflow.steps.iter().map(|s| s.task);
    let compensations = workflow.rollback_steps.iter().map(|r| r.task);
    let mut statuses = HashMap::new();
    for ids in [steps.collect::<Vec<_>>(), compensations.collect()] {
        if let (Some(&low), Some(&high)) = (ids.iter().min(), ids.iter().max()) {
            statuses.extend(ctx.store.statuses(low..=high)?);
        }
    }
    Ok(statuses)
}

/// `WorkflowCancel`: cancels its unfinished steps.
pub async fn cancel(
    ctx: &Context,
    actor: Actor,
    id: WorkflowId,
) -> Result<WorkflowSummary, AppError> {
    let cancel = |reply| Command::CancelWorkflow { actor, id, reply };
    Ok(ctx.engine.request(cancel).await?)
}

/// `WorkflowRestart`: a new workflow of the finished workflow `id`'s steps from `step`
/// on ([`restart`]), answered with its summary once it is durable.
pub async fn restart(
    ctx: &Context,
    actor: Actor,
    id: WorkflowId,
    step: &str,
) -> Result<WorkflowSummary, AppError> {
    let workflow = stored(ctx, id)?;
    let statuses = stored_statuses(ctx, &workflow)?;
    let mut specs = HashMap::new();
    if let Some(chosen) = restart::restarted_steps(&workflow, step) {
        let tasks = workflow.steps.iter().filter(|s| chosen.contains(&s.id));
        for task in tasks.map(|s| s.task) {
            if let Some(stored) = ctx.store.get(task)? {
                specs.insert(task, stored.spec);
            }
        }
    }
    let run = restart::FinishedRun {
        workflow: &workflow,
        specs: &specs,
        statuses: &statuses,
    };
    let draft = restart::draft(&run, step).map_err(|e| refusal(&e))?;
    let submit = |reply| Command::SubmitWorkflow {
        actor,
        draft: Box::new(draft),
        reply,
    };
    Ok(ctx.engine.request(submit).await?)
}

/// A restart's refusal as the answer names it: the step asked for, or the workflow's
/// state.
fn refusal(error: &restart::RestartError) -> AppError {
    use restart::RestartError as E;
    let (kind, field) = match error {
        E::NoSuchStep { .. } => (AppErrorKind::NotFound, "step"),
        E::Removed { .. } | E::DependencyNotDone { .. } => (AppErrorKind::Conflict, "step"),
        E::NotFinished { .. } | E::RolledBack { .. } => (AppErrorKind::Conflict, "id"),
    };
    AppError::field(kind, field, error.to_string())
}

/// `WorkflowRollback`: compensates its completed steps.
pub async fn rollback(
    ctx: &Context,
    actor: Actor,
    id: WorkflowId,
) -> Result<WorkflowSummary, AppError> {
    let rollback = |reply| Command::RollbackWorkflow { actor, id, reply };
    Ok(ctx.engine.request(rollback).await?)
}
