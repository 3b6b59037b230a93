//! `Wait`: answer once every named task is in a final state.

use std::collections::{HashMap, HashSet};

use orch_protocol::{ErrorKind, ErrorReply, EventKind, Response, Task, TaskId};
use tokio::sync::broadcast::error::RecvError;

use super::{no_such_task, store_error};
use crate::server::{Connection, Context};

pub async fn handle(ctx: &Context, conn: &mut Connection, ids: Vec<TaskId>) -> std::io::Result<()> {
    if ids.is_empty() {
        let reply = ErrorReply::field(ErrorKind::BadRequest, "ids", "no task ids to wait for");
        return conn.send(&Response::Error(reply)).await;
    }
    let mut events = ctx.bus.subscribe();
    let mut pending: HashSet<TaskId> = ids.iter().copied().collect();
    let mut finished = HashMap::new();
    let all: Vec<TaskId> = pending.iter().copied().collect();
    if let Err(reply) = check(ctx, &all, &mut pending, &mut finished) {
        return conn.send(&Response::Error(reply)).await;
    }
    while !pending.is_empty() {
        let result = tokio::select! {
            event = events.recv() => match event {
                Ok(event) if pending.contains(&event.task) && ends_task(&event.kind) => {
                    check(ctx, &[event.task], &mut pending, &mut finished)
                }
                Ok(_) => Ok(()),
                Err(RecvError::Lagged(_)) => {
                    let all: Vec<TaskId> = pending.iter().copied().collect();
                    check(ctx, &all, &mut pending, &mut finished)
                }
                Err(RecvError::Closed) => break,
            },
            () = conn.closed() => return Ok(()),
            () = ctx.shutdown.cancelled() => break,
        };
        if let Err(reply) = result {
            return conn.send(&Response::Error(reply)).await;
        }
    }
    if !pending.is_empty() {
        let reply = ErrorReply::new(ErrorKind::Unavailable, "the daemon is shutting down");
        return conn.send(&Response::Error(reply)).await;
    }
    let tasks: Vec<Task> = ids.iter().map(|id| finished[id].clone()).collect();
    conn.send_tasks(&tasks).await
}

/// Events after which a task may be final (a submission can be final at once: its
/// dependency had already failed).
fn ends_task(kind: &EventKind) -> bool {
    kind.is_final() || matches!(kind, EventKind::Submitted { .. })
}

/// Moves each of `ids` that is in a final state from `pending` to `finished`.
fn check(
    ctx: &Context,
    ids: &[TaskId],
    pending: &mut HashSet<TaskId>,
    finished: &mut HashMap<TaskId, Task>,
) -> Result<(), ErrorReply> {
    for id in ids {
        let task = ctx.store.get(*id).map_err(store_error)?;
        let task = task.ok_or_else(|| no_such_task(*id))?;
        if task.state.status().is_final() {
            pending.remove(id);
            finished.insert(*id, task);
        }
    }
    Ok(())
}
