//! The logs another node keeps (of the attempts it ran, of the test environments on its
//! engine), read through the store: asked again every second while followed.

use std::sync::Arc;
use std::time::Duration;

use orch_protocol::{Actor, EnvId, ErrorKind, ErrorReply, Request, Response, TaskId};

use super::Relay;
use super::forward::Patience;
use crate::ops::Context;
use crate::policy::Role;
use crate::server::Connection;
use crate::server::forwarded::split_frames;

/// How often a followed log of another node is read again.
const REMOTE_LOG_POLL: Duration = Duration::from_secs(1);
/// The largest text sent in one `log` frame.
const LOG_CHUNK: usize = 64 * 1024;

/// A log another node keeps.
#[derive(Clone, Copy)]
pub enum RemoteLog {
    /// Task `id`'s, of the attempt that node ran.
    Task(TaskId),
    /// Test environment `id`'s: its containers' logs, then its own.
    Env(EnvId),
}

impl Relay {
    /// Sends `log`, kept by node `node` (which ran the task's last attempt, or holds
    /// the environment), to `conn`'s client as `log` frames then `stream_end`; with
    /// `follow`, reads it again every second until the task is final (the environment
    /// not at work). An `Err` means the connection is gone.
    pub async fn remote_log(
        self: &Arc<Self>,
        ctx: &Context,
        conn: &mut Connection,
        node: &str,
        log: RemoteLog,
        follow: bool,
    ) -> std::io::Result<()> {
        let request = match log {
            RemoteLog::Task(id) => Request::Logs { id, follow: false },
            RemoteLog::Env(id) => Request::EnvLogs { id, follow: false },
        };
        let mut sent = 0;
        let mut first = true;
        loop {
            // Read before the log, so that the last read has all of the final output.
            let last = !follow || finished(ctx, log);
            let parts = match self.exchange(conn, &request, Some(node)).await {
                Some(Ok(frames)) => log_parts(&frames),
                Some(Err(reply)) => Err(reply),
                None => return Ok(()),
            };
            let (containers, text) = match parts {
                Ok(parts) => parts,
                Err(reply) => return conn.send(&Response::Error(reply)).await,
            };
            // An environment's containers' logs come first, once.
            if std::mem::take(&mut first) {
                for text in containers {
                    conn.send(&Response::Log { text }).await?;
                }
            }
            // A character cut by the read shows as U+FFFD: held back until it is whole.
            let ready = match text.strip_suffix('\u{FFFD}') {
                Some(whole) if !last => whole,
                _ => text.as_str(),
            };
            // Only what was not sent yet (a log is only appended to).
            if let Some(new) = ready.get(sent..) {
                for chunk in chunks(new) {
                    conn.send(&Response::Log {
                        text: chunk.to_string(),
                    })
                    .await?;
                }
                sent = ready.len();
            }
            if last {
                return conn.send(&Response::StreamEnd).await;
            }
            tokio::select! {
                () = tokio::time::sleep(REMOTE_LOG_POLL) => {}
                () = conn.closed() => return Ok(()),
                () = ctx.shutdown.cancelled() => return conn.send(&Response::StreamEnd).await,
            }
        }
    }

    /// Environment `id`'s own log (its containers' logs left out), kept by node `node`,
    /// asked for by `actor`, who has `role`.
    pub async fn remote_log_text(
        self: &Arc<Self>,
        node: &str,
        actor: &Actor,
        role: Role,
        id: EnvId,
    ) -> Result<String, ErrorReply> {
        let request = serde_json::to_vec(&Request::EnvLogs { id, follow: false })
            .map_err(|e| ErrorReply::new(ErrorKind::Internal, e.to_string()))?;
        let frames = self
            .ask(Some(node), actor, role, request, Patience::Read)
            .await
            .map_err(ErrorReply::from)?;
        Ok(log_parts(&frames)?.1)
    }
}

/// Whether `log`'s writer is done: the task final, the environment not at work.
fn finished(ctx: &Context, log: RemoteLog) -> bool {
    match log {
        RemoteLog::Task(id) => {
            crate::ops::tasks::get(ctx, id).is_ok_and(|t| t.state.status().is_final())
        }
        RemoteLog::Env(id) => ctx.testenvs.get(id).is_ok_and(|e| !e.state.is_busy()),
    }
}

/// A log's answer (`log` frames then `stream_end`): the containers' logs an
/// environment's log starts with, and the text after them; or its error.
fn log_parts(frames: &[u8]) -> Result<(Vec<String>, String), ErrorReply> {
    let malformed = |problem: String| {
        ErrorReply::new(
            ErrorKind::Internal,
            format!("another node's answer to a log's request is not well formed: {problem}"),
        )
    };
    let (mut containers, mut text) = (Vec::new(), String::new());
    for body in split_frames(frames).map_err(malformed)? {
        match serde_json::from_slice::<Response>(body).map_err(|e| malformed(e.to_string()))? {
            Response::Log { text: part }
                if text.is_empty() && part.starts_with(crate::ops::logs::CONTAINER_LOG) =>
            {
                containers.push(part);
            }
            Response::Log { text: part } => text.push_str(&part),
            Response::StreamEnd => return Ok((containers, text)),
            Response::Error(reply) => return Err(reply),
            other => return Err(malformed(format!("an unexpected answer {other:?}"))),
        }
    }
    Err(malformed("no stream_end".into()))
}

/// `text` in pieces of at most [`LOG_CHUNK`] bytes, cut at character boundaries.
fn chunks(mut text: &str) -> impl Iterator<Item = &str> {
    std::iter::from_fn(move || {
        if text.is_empty() {
            return None;
        }
        let mut end = text.len().min(LOG_CHUNK);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let (piece, rest) = text.split_at(end);
        text = rest;
        Some(piece)
    })
}
