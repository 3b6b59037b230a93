//! `Logs`: a task's output log, optionally followed until the task is final.

use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

use orch_protocol::{ErrorReply, Response, TaskId};

use super::{no_such_task, store_error};
use crate::runner::log_path;
use crate::server::{Connection, Context};

/// How often a followed log is checked for new output.
pub(super) const FOLLOW_POLL: Duration = Duration::from_millis(100);

/// The largest chunk sent in one frame.
const CHUNK: usize = 64 * 1024;

pub async fn handle(
    ctx: &Context,
    conn: &mut Connection,
    id: TaskId,
    follow: bool,
) -> std::io::Result<()> {
    if let Err(reply) = task_is_final(ctx, id) {
        return conn.send(&Response::Error(reply)).await;
    }
    let path = log_path(&ctx.logs_dir, id);
    let mut tail = Tail::default();
    loop {
        let finished = match task_is_final(ctx, id) {
            Ok(finished) => finished,
            Err(reply) => return conn.send(&Response::Error(reply)).await,
        };
        while let Some(text) = tail.next_chunk(&path)? {
            conn.send(&Response::Log { text }).await?;
        }
        if !follow || finished {
            break;
        }
        tokio::select! {
            () = tokio::time::sleep(FOLLOW_POLL) => {}
            () = conn.closed() => return Ok(()),
            () = ctx.shutdown.cancelled() => break,
        }
    }
    if let Some(text) = tail.rest() {
        conn.send(&Response::Log { text }).await?;
    }
    conn.send(&Response::StreamEnd).await
}

fn task_is_final(ctx: &Context, id: TaskId) -> Result<bool, ErrorReply> {
    let task = ctx.store.get(id).map_err(store_error)?;
    Ok(task
        .ok_or_else(|| no_such_task(id))?
        .state
        .status()
        .is_final())
}

/// Reads a growing file one chunk at a time (so a reader holds one chunk, whatever the
/// file's size), returning whole UTF-8 text (a split character waits for its remaining
/// bytes).
#[derive(Default)]
pub(super) struct Tail {
    offset: u64,
    pending: Vec<u8>,
}

impl Tail {
    /// The next chunk of text added to the file, or `None` when there is nothing new yet.
    pub(super) fn next_chunk(&mut self, path: &std::path::Path) -> std::io::Result<Option<String>> {
        let mut file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        file.seek(SeekFrom::Start(self.offset))?;
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                return Ok(None);
            }
            self.offset += n as u64;
            self.pending.extend_from_slice(&buf[..n]);
            let valid = match std::str::from_utf8(&self.pending) {
                Ok(_) => self.pending.len(),
                Err(e) if e.error_len().is_none() => e.valid_up_to(),
                Err(_) => self.pending.len(),
            };
            let bytes: Vec<u8> = self.pending.drain(..valid).collect();
            if !bytes.is_empty() {
                return Ok(Some(String::from_utf8_lossy(&bytes).into_owned()));
            }
        }
    }

    /// Bytes still held back at the end (an incomplete character), replaced.
    pub(super) fn rest(&mut self) -> Option<String> {
        if self.pending.is_empty() {
            return None;
        }
        Some(String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned())
    }
}
