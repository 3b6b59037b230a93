//! `Watch`: stream events, replaying the log after `since` first.

use orch_protocol::{ErrorReply, Event, Response, TaskId};
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
) -> std::io::Result<()> {
    let mut live = ctx.bus.subscribe();
    let start = match start_point(ctx, since, task) {
        Ok(start) => start,
        Err(reply) => return conn.send(&Response::Error(reply)).await,
    };
    let mut stream = Stream {
        last: start,
        task,
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
                        stream.send(conn, &event).await?;
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
/// the watched task, else only what happens from now on.
fn start_point(ctx: &Context, since: Option<u64>, task: Option<TaskId>) -> Result<u64, ErrorReply> {
    if let Some(id) = task {
        ctx.store
            .get(id)
            .map_err(store_error)?
            .ok_or_else(|| no_such_task(id))?;
    }
    match (since, task) {
        (Some(seq), _) => Ok(seq),
        (None, Some(_)) => Ok(0),
        (None, None) => ctx.store.last_event_seq().map_err(store_error),
    }
}

/// Where a watch stream is.
struct Stream {
    last: u64,
    task: Option<TaskId>,
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
                self.send(conn, event).await?;
                if self.ended {
                    return Ok(Ok(()));
                }
            }
        }
    }

    /// Sends `event` unless it was already sent or filtered out.
    async fn send(&mut self, conn: &mut Connection, event: &Event) -> std::io::Result<()> {
        if event.seq <= self.last {
            return Ok(());
        }
        self.last = event.seq;
        if self.task.is_some_and(|id| id != event.task) {
            return Ok(());
        }
        conn.send(&Response::Event {
            event: event.clone(),
        })
        .await?;
        self.ended = self.task.is_some() && event.kind.is_final();
        Ok(())
    }
}
