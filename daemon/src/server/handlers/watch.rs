//! `Watch`: stream events, replaying the log after `since` first.

use orch_protocol::{ErrorKind, ErrorReply, Event, EventKind, Response, TaskId, WorkflowId};
use tokio::sync::broadcast::error::RecvError;

use super::{no_such_task, store_error};
use crate::server::{Connection, Context};

/// How many logged events are read from the store at a time.
const PAGE: usize = 1024;

pub async fn handle(
    ctx: &Context,
    conn: &mut Connection,
    since: Option<u64>,
    task: Option<TaskId>,
    workflow: Option<WorkflowId>,
) -> std::io::Result<()> {
    let mut live = ctx.bus.subscribe();
    let start = match start_point(ctx, since, task, workflow) {
        Ok(start) => start,
        Err(reply) => return conn.send(&Response::Error(reply)).await,
    };
    let mut stream = Stream {
        last: start,
        task,
        workflow,
        ended: false,
    };
    // Replay, then live; a lagging subscriber replays what it missed from the log.
    loop {
        if let Err(reply) = stream.replay(ctx, conn).await? {
            return conn.send(&Response::Error(reply)).await;
        }
        if stream.ended {
            return conn.send(&Response::StreamEnd).await;
        }
        loop {
            tokio::select! {
                event = live.recv() => match event {
                    Ok(event) => {
                        stream.send(ctx, conn, &event).await?;
                        if stream.ended {
                            return conn.send(&Response::StreamEnd).await;
                        }
                    }
                    Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => return conn.send(&Response::StreamEnd).await,
                },
                () = conn.closed() => return Ok(()),
                () = ctx.shutdown.cancelled() => return conn.send(&Response::StreamEnd).await,
            }
        }
    }
}

/// The sequence number after which events are sent: `since`, else the whole history of
/// the watched task or workflow, else only what happens from now on.
fn start_point(
    ctx: &Context,
    since: Option<u64>,
    task: Option<TaskId>,
    workflow: Option<WorkflowId>,
) -> Result<u64, ErrorReply> {
    if let Some(id) = task {
        ctx.store
            .get(id)
            .map_err(store_error)?
            .ok_or_else(|| no_such_task(id))?;
    }
    if let Some(id) = workflow {
        ctx.store
            .workflow(id)
            .map_err(store_error)?
            .ok_or_else(|| {
                ErrorReply::field(
                    ErrorKind::NotFound,
                    "workflow",
                    format!("there is no workflow {id}"),
                )
            })?;
    }
    match (since, task.or(workflow)) {
        (Some(seq), _) => Ok(seq),
        (None, Some(_)) => Ok(0),
        (None, None) => ctx.store.last_event_seq().map_err(store_error),
    }
}

/// Where a watch stream is.
struct Stream {
    last: u64,
    task: Option<TaskId>,
    workflow: Option<WorkflowId>,
    ended: bool,
}

impl Stream {
    /// Sends logged events after `last`; the inner result is a store error.
    async fn replay(
        &mut self,
        ctx: &Context,
        conn: &mut Connection,
    ) -> std::io::Result<Result<(), ErrorReply>> {
        loop {
            let page = match ctx.store.events_after(self.last, PAGE) {
                Ok(page) => page,
                Err(e) => return Ok(Err(store_error(e))),
            };
            if page.is_empty() {
                return Ok(Ok(()));
            }
            for event in &page {
                self.send(ctx, conn, event).await?;
                if self.ended {
                    return Ok(Ok(()));
                }
            }
        }
    }

    /// Sends `event` unless it was already sent or filtered out.
    async fn send(
        &mut self,
        ctx: &Context,
        conn: &mut Connection,
        event: &Event,
    ) -> std::io::Result<()> {
        if event.seq <= self.last {
            return Ok(());
        }
        self.last = event.seq;
        if self.task.is_some_and(|id| id != event.task)
            || self.workflow.is_some_and(|id| Some(id) != event.workflow)
        {
            return Ok(());
        }
        conn.send(&Response::Event {
            event: event.clone(),
        })
        .await?;
        self.ended = match (self.task, self.workflow) {
            (Some(_), _) => event.kind.is_final(),
            (None, Some(id)) => ends_workflow(ctx, id, event),
            (None, None) => false,
        };
        Ok(())
    }
}

/// Whether `event` is the workflow's last: the change to the final state it is in now (a
/// finished workflow can be rolled back later, and a replay must go on to that).
fn ends_workflow(ctx: &Context, id: WorkflowId, event: &Event) -> bool {
    let EventKind::Workflow { status, .. } = &event.kind else {
        return false;
    };
    if event.task != id || !status.is_final() {
        return false;
    }
    ctx.store
        .workflow(id)
        .ok()
        .flatten()
        .is_none_or(|w| w.last_event == event.seq)
}
