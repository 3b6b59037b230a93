//! `Wait`: answer once every named task is in a final state.

use std::collections::HashMap;

use orch_protocol::{ErrorKind, ErrorReply, Response, Task, TaskId};
use tokio::sync::broadcast::error::RecvError;

use super::{no_such_task, store_error};
use crate::server::{Connection, Context};

pub async fn handle(ctx: &Context, conn: &mut Connection, ids: Vec<TaskId>) -> std::io::Result<()> {
    if ids.is_empty() {
        let reply = ErrorReply::field(ErrorKind::BadRequest, "ids", "no task ids to wait for");
        return conn.send(&Response::Error(reply)).await;
    }
    let mut events = ctx.bus.subscribe();
    let mut finished = HashMap::new();
    if let Err(reply) = collect_finished(ctx, &ids, &mut finished) {
        return conn.send(&Response::Error(reply)).await;
    }
    while finished.len() < ids.len() {
        tokio::select! {
            event = events.recv() => match event {
                Ok(event) if !ids.contains(&event.task) => continue,
                Ok(_) | Err(RecvError::Lagged(_)) => {
                    if let Err(reply) = collect_finished(ctx, &ids, &mut finished) {
                        return conn.send(&Response::Error(reply)).await;
                    }
                }
                Err(RecvError::Closed) => break,
            },
            () = conn.closed() => return Ok(()),
            () = ctx.shutdown.cancelled() => break,
        }
    }
    if finished.len() < ids.len() {
        let reply = ErrorReply::new(ErrorKind::Unavailable, "the daemon is shutting down");
        return conn.send(&Response::Error(reply)).await;
    }
    let tasks = ids.iter().map(|id| finished[id].clone()).collect();
    conn.send(&Response::Tasks { tasks }).await
}

/// Adds every task of `ids` that is in a final state to `finished`.
fn collect_finished(
    ctx: &Context,
    ids: &[TaskId],
    finished: &mut HashMap<TaskId, Task>,
) -> Result<(), ErrorReply> {
    for id in ids {
        if finished.contains_key(id) {
            continue;
        }
        let task = ctx.store.get(*id).map_err(store_error)?;
        let task = task.ok_or_else(|| no_such_task(*id))?;
        if task.state.status().is_final() {
            finished.insert(*id, task);
        }
    }
    Ok(())
}
