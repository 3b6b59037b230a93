//! `Watch` and `GET /events`: where a stream of events starts and what it passes on
//! (the stream itself is [`crate::events::Stream`]).

use orch_protocol::{TaskId, WorkflowId};

use super::{AppError, AppErrorKind, Context};
use crate::events::{Filter, Stream};

/// `Watch`: the events after `since`; without it, the whole history of the watched task
/// or workflow, or else only what happens from now on. Watching a task or a workflow ends
/// at its final state.
pub fn watch(
    ctx: &Context,
    since: Option<u64>,
    task: Option<TaskId>,
    workflow: Option<WorkflowId>,
) -> Result<Stream, AppError> {
    if let Some(id) = task {
        super::tasks::get(ctx, id)?;
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
    let after = match (since, task.or(workflow)) {
        (Some(seq), _) => seq,
        (None, Some(_)) => 0,
        (None, None) => ctx.store.last_event_seq()?,
    };
    let filter = Filter { task, workflow };
    Ok(Stream::new(&ctx.bus, ctx.store.clone(), after, filter).until_final())
}

/// `GET /events`: the events after `since` (without it, from now on) that pass `filter`,
/// followed until the client leaves.
pub fn follow(ctx: &Context, since: Option<u64>, filter: Filter) -> Result<Stream, AppError> {
    let after = match since {
        Some(seq) => seq,
        None => ctx.store.last_event_seq()?,
    };
    Ok(Stream::new(&ctx.bus, ctx.store.clone(), after, filter))
}
