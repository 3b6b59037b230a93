//! The socket adapter's streams: `watch` (events) and `logs`/`env_logs`/`audit_export`
//! (text), item by
//! item, then `stream_end`. A stream stops when its client sends anything or hangs up,
//! and ends (with `stream_end`) when the daemon stops.

use orch_protocol::{EnvId, Response, TaskId, WorkflowId};

use super::Connection;
use crate::cluster::relay::RemoteLog;
use crate::ops::logs::Follower;
use crate::ops::{self, AppError, Context};

/// `Watch`: events until the watched task or workflow is final (or for ever).
pub async fn watch(
    ctx: &Context,
    conn: &mut Connection,
    since: Option<u64>,
    task: Option<TaskId>,
    workflow: Option<WorkflowId>,
) -> std::io::Result<()> {
    let mut events = match ops::watch::watch(ctx, since, task, workflow) {
        Ok(events) => events,
        Err(e) => return conn.send_error(e).await,
    };
    loop {
        let next = tokio::select! {
            next = events.next() => next,
            () = conn.closed() => return Ok(()),
            () = ctx.shutdown.cancelled() => break,
        };
        match next {
            Ok(Some(event)) => {
                let event = Response::Event {
                    event: (*event).clone(),
                };
                conn.send(&event).await?;
            }
            Ok(None) => break,
            Err(e) => return conn.send_error(e.into()).await,
        }
    }
    conn.send(&Response::StreamEnd).await
}

/// `Logs`: a task's log, followed until the task is final.
pub async fn task_log(
    ctx: &Context,
    conn: &mut Connection,
    id: TaskId,
    follow: bool,
) -> std::io::Result<()> {
    // Another node of the cluster keeps it: asked through the store (unless this is
    // such a question).
    if let Some(relay) = ctx.relay.as_ref().filter(|_| !conn.forwarded) {
        if follow && !started(ctx, conn, id).await {
            return Ok(());
        }
        match ops::logs::kept_by(ctx, id) {
            Ok(Some(node)) => {
                return relay
                    .remote_log(ctx, conn, &node, RemoteLog::Task(id), follow)
                    .await;
            }
            Ok(None) => {}
            Err(e) => return conn.send_error(e).await,
        }
    }
    match ops::logs::task_log(ctx, id, follow) {
        Ok(follower) => send_log(ctx, conn, follower).await,
        Err(e) => conn.send_error(e).await,
    }
}

/// Waits until task `id` has an attempt (so that the node that keeps its log is known)
/// or is final; false when the client left.
async fn started(ctx: &Context, conn: &mut Connection, id: TaskId) -> bool {
    loop {
        match ops::tasks::get(ctx, id) {
            Ok(task) if task.attempts.is_empty() && !task.state.status().is_final() => {}
            _ => return true,
        }
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
            () = conn.closed() => return false,
            () = ctx.shutdown.cancelled() => return true,
        }
    }
}

/// `EnvLogs`: a test environment's containers' logs, then its own, followed while the
/// daemon works on it (asked of the node that holds it, in a cluster).
pub async fn env_log(
    ctx: &Context,
    conn: &mut Connection,
    id: EnvId,
    follow: bool,
) -> std::io::Result<()> {
    if let Some(relay) = ctx.relay.as_ref().filter(|_| !conn.placed) {
        match ops::envs::holder(ctx, id) {
            Ok(Some(node)) => {
                return relay
                    .remote_log(ctx, conn, &node, RemoteLog::Env(id), follow)
                    .await;
            }
            Ok(None) => {}
            Err(e) => return conn.send_error(e).await,
        }
    }
    let (containers, follower) = match ops::logs::env_log(ctx, id, follow).await {
        Ok(parts) => parts,
        Err(e) => return conn.send_error(e).await,
    };
    for text in containers {
        conn.send(&Response::Log { text }).await?;
    }
    send_log(ctx, conn, follower).await
}

/// `AuditExport`: an archived audit segment, as it is on disk.
pub async fn audit_export(ctx: &Context, conn: &mut Connection, seq: u64) -> std::io::Result<()> {
    match ops::audit::export(ctx, seq) {
        Ok(follower) => send_log(ctx, conn, follower).await,
        Err(e) => conn.send_error(e).await,
    }
}

/// Sends what `follower` reads as `log` frames, then `stream_end`.
async fn send_log<W: FnMut() -> Result<bool, AppError>>(
    ctx: &Context,
    conn: &mut Connection,
    mut follower: Follower<W>,
) -> std::io::Result<()> {
    loop {
        let next = tokio::select! {
            next = follower.next() => Some(next),
            () = conn.closed() => return Ok(()),
            () = ctx.shutdown.cancelled() => None,
        };
        match next {
            Some(Ok(Some(text))) => conn.send(&Response::Log { text }).await?,
            Some(Ok(None)) => break,
            Some(Err(e)) => return conn.send_error(e).await,
            // Stopping: the rest of a split character, then the end.
            None => {
                if let Some(text) = follower.rest() {
                    conn.send(&Response::Log { text }).await?;
                }
                break;
            }
        }
    }
    conn.send(&Response::StreamEnd).await
}
