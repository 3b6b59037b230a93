//! `Watch` and `GET /events`: where a stream of events starts and what it passes on
//! (the stream itself is [`crate::events::Stream`]).

use orch_protocol::{TaskId, WorkflowId};

use super::{AppError, AppErrorKind, Context};
use crate::events::{Filter, Stream};

/// `Watch`: the events after `since`; without it, the whole history of the watched task
/// (or test environment: `task` may name one) or workflow, or else only what happens from
/// now on. Watching a task, an environment or a workflow ends at its final state.
pub fn watch(
    ctx: &Context,
    since: Option<u64>,
    task: Option<TaskId>,
    workflow: Option<WorkflowId>,
) -> Result<Stream, AppError> {
    if let Some(id) = task {
        watched_task_or_env(ctx, id)?;
    }
    if let Some(id) = workflow {
        ctx.store.workflow(id)?.ok_or_else(|| {
            AppError::field(
                AppErrorKind::NotFound,
                "workflow",
                format!("there is no workflow {id}"),
            )
        })?;
    }
    let removed = removed_through(ctx, since)?;
    let after = match (since, task.or(workflow)) {
        (Some(seq), _) => seq,
        (None, Some(_)) => 0,
        (None, None) => ctx.store.last_event_seq()?,
    };
    let filter = Filter {
        task,
        workflow,
        types: None,
    };
    let stream = Stream::new(&ctx.bus, ctx.store.clone(), after, filter).until_final();
    // A finished task or workflow whose final event may have been removed: what is kept
    // of its history, then the end.
    if after < removed && is_final(ctx, task, workflow)? {
        return Ok(stream.history_only());
    }
    Ok(stream)
}

/// How far the event retention removed the log; a `since` other than 0 (the whole log
/// that is kept) before that is refused: the events after it are not all there.
fn removed_through(ctx: &Context, since: Option<u64>) -> Result<u64, AppError> {
    let removed = ctx.store.events_removed_through()?;
    match since {
        Some(seq) if seq > 0 && seq < removed => Err(AppError::field(
            AppErrorKind::Invalid,
            "since",
            format!(
                "the events up to {removed} were removed by the event retention (--retain-events); watch from since {removed} or later, since 0 for all that is kept, or without since"
            ),
        )),
        _ => Ok(removed),
    }
}

/// What a watch of `--task ID` follows: the task, or else the test environment with that
/// id (both come from one sequence of ids).
enum Watched {
    Task(orch_protocol::Task),
    Env(orch_protocol::TestEnv),
}

/// The task `id`, or the test environment `id`; an error naming the task when neither
/// exists.
fn watched_task_or_env(ctx: &Context, id: TaskId) -> Result<Watched, AppError> {
    match super::tasks::get(ctx, id) {
        Ok(task) => Ok(Watched::Task(task)),
        Err(missing) if missing.kind == AppErrorKind::NotFound => {
            ctx.testenvs.get(id).map(Watched::Env).map_err(|_| missing)
        }
        Err(e) => Err(e),
    }
}

/// Whether the watched task (or test environment) or workflow is final now.
fn is_final(
    ctx: &Context,
    task: Option<TaskId>,
    workflow: Option<WorkflowId>,
) -> Result<bool, AppError> {
    if let Some(id) = task {
        return Ok(match watched_task_or_env(ctx, id)? {
            Watched::Task(task) => task.state.status().is_final(),
            Watched::Env(env) => matches!(env.state, orch_protocol::EnvState::Deleted { .. }),
        });
    }
    match workflow {
        Some(id) => Ok(ctx
            .store
            .workflow(id)?
            .is_some_and(|w| w.state.status().is_final())),
        None => Ok(false),
    }
}

/// `GET /events`: the events after `since` (without it, from now on) that pass `filter`,
/// followed until the client leaves.
pub fn follow(ctx: &Context, since: Option<u64>, filter: Filter) -> Result<Stream, AppError> {
    removed_through(ctx, since)?;
    let after = match since {
        Some(seq) => seq,
        None => ctx.store.last_event_seq()?,
    };
    Ok(Stream::new(&ctx.bus, ctx.store.clone(), after, filter))
}
