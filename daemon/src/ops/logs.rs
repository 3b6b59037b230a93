//! `Logs` and `EnvLogs`: a task's output log, a test environment's log (after its
//! containers' logs), each read by one [`Follower`], optionally until its writer is done;
//! and a page of a task's log by byte offset ([`task_log_page`], for a tail that follows
//! a growing log over HTTP).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use orch_protocol::{EnvId, EnvState, LogPage, TaskId};

use super::{AppError, Context};
use crate::runner::log_path;
use crate::testenv::engine::ContainerEngine;

/// How often a followed log is checked for new output.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

/// The largest chunk read at a time (and sent in one frame).
const CHUNK: usize = 64 * 1024;

/// `Logs`: task `id`'s log, followed (with `follow`) until the task is final.
pub fn task_log(
    ctx: &Context,
    id: TaskId,
    follow: bool,
) -> Result<Follower<impl FnMut() -> Result<bool, AppError> + '_>, AppError> {
    ran_here(ctx, id)?;
    let writing = move || task_is_running(ctx, id);
    Ok(Follower::new(log_path(&ctx.logs_dir, id), follow, writing))
}

/// Where a page of a log starts: at a byte offset, or that many bytes before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageStart {
    /// From this offset.
    At(u64),
    /// The last this many bytes.
    Tail(u64),
}

impl PageStart {
    /// The offset it names in a log of `size` bytes (at most the end).
    fn offset_in(self, size: u64) -> u64 {
        match self {
            PageStart::At(offset) => offset.min(size),
            PageStart::Tail(bytes) => size.saturating_sub(bytes),
        }
    }
}

/// Task `id`'s log from `start`, at most `limit` bytes (and at most [`CHUNK`]). A task
/// that wrote nothing has an empty log; a page past the end is empty and says where the
/// end is.
pub fn task_log_page(
    ctx: &Context,
    id: TaskId,
    start: PageStart,
    limit: usize,
) -> Result<LogPage, AppError> {
    // Read before the file: a log read after its task was seen final is whole.
    let complete = !task_is_running(ctx, id)?;
    ran_here(ctx, id)?;
    let what = format!("task {id}'s log");
    file_page(&log_path(&ctx.logs_dir, id), &what, start, limit, complete)
}

/// Environment `id`'s own log (setup, probes, tests) from `start`, at most `limit` bytes
/// (and at most [`CHUNK`]); `complete` once the daemon no longer works on it.
pub fn env_log_page(
    ctx: &Context,
    id: EnvId,
    start: PageStart,
    limit: usize,
) -> Result<LogPage, AppError> {
    ctx.testenvs.get(id)?;
    let complete = !ctx.testenvs.is_busy(id);
    let what = format!("test environment {id}'s log");
    file_page(&ctx.testenvs.log_path(id), &what, start, limit, complete)
}

/// The page of `text` (a whole log, read elsewhere) from `start`, at most `limit` bytes
/// (and at most [`CHUNK`]).
pub fn text_page(text: &str, start: PageStart, limit: usize, complete: bool) -> LogPage {
    let bytes = text.as_bytes();
    let size = bytes.len() as u64;
    let offset = start.offset_in(size);
    let end = (offset + limit.min(CHUNK) as u64).min(size);
    let page = &bytes[offset as usize..end as usize];
    LogPage {
        offset,
        next_offset: end,
        size,
        text: String::from_utf8_lossy(page).into_owned(),
        complete,
    }
}

/// The page of the log file at `path` (`what` names it in errors) from `start`, at most
/// `limit` bytes (and at most [`CHUNK`]). A missing file is an empty log; a page past the
/// end is empty and says where the end is.
fn file_page(
    path: &Path,
    what: &str,
    start: PageStart,
    limit: usize,
    complete: bool,
) -> Result<LogPage, AppError> {
    let unreadable = |e: std::io::Error| {
        AppError::new(
            super::AppErrorKind::Internal,
            format!("{what} cannot be read: {e}"),
        )
    };
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(LogPage {
                offset: 0,
                next_offset: 0,
                size: 0,
                text: String::new(),
                complete,
            });
        }
        Err(e) => return Err(unreadable(e)),
    };
    let size = file.metadata().map_err(unreadable)?.len();
    let offset = start.offset_in(size);
    let wanted = limit.min(CHUNK) as u64;
    let mut bytes = Vec::with_capacity(wanted.min(size - offset) as usize);
    file.seek(SeekFrom::Start(offset)).map_err(unreadable)?;
    file.take(wanted)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    Ok(LogPage {
        offset,
        next_offset: offset + bytes.len() as u64,
        size: size.max(offset + bytes.len() as u64),
        text: String::from_utf8_lossy(&bytes).into_owned(),
        complete,
    })
}

/// The other node of the cluster that keeps task `id`'s log (it ran its last attempt),
/// if another does.
pub fn kept_by(ctx: &Context, id: TaskId) -> Result<Option<String>, AppError> {
    let task = super::tasks::get(ctx, id)?;
    let (Some(cluster), Some(node)) = (
        &ctx.cluster,
        task.attempts.last().and_then(|a| a.node.as_ref()),
    ) else {
        return Ok(None);
    };
    Ok((node != cluster.name()).then(|| node.clone()))
}

/// Refuses the log of a task whose last attempt another node of the cluster ran (its
/// log is in that node's data directory), naming the node, with its socket when it is on
/// this host (where a client may ask it instead). A node asks the other through the
/// store instead ([`crate::cluster::relay`]); this answers a node that asks for a log
/// that has moved on since (the task ran again elsewhere).
fn ran_here(ctx: &Context, id: TaskId) -> Result<(), AppError> {
    let (Some(cluster), Some(node)) = (&ctx.cluster, kept_by(ctx, id)?) else {
        return Ok(());
    };
    let node = node.as_str();
    let socket = cluster.socket_here(node, false);
    let mut error = AppError::new(
        super::AppErrorKind::Unavailable,
        format!(
            "task {id}'s last attempt ran on node {node}, which keeps its log: ask that node{}",
            socket.as_ref().map_or_else(
                || " (it is not up on this host)".to_string(),
                |s| format!(" (socket {})", s.display())
            )
        ),
    );
    error.elsewhere = socket;
    Err(error)
}

fn task_is_running(ctx: &Context, id: TaskId) -> Result<bool, AppError> {
    Ok(!super::tasks::get(ctx, id)?.state.status().is_final())
}

/// How each container's log in a test environment's log begins.
pub const CONTAINER_LOG: &str = "=== container ";

/// `EnvLogs`: environment `id`'s containers' logs (while it has containers), then its
/// own log (setup, probes, tests), followed (with `follow`) while the daemon works on it.
pub async fn env_log(
    ctx: &Context,
    id: EnvId,
    follow: bool,
) -> Result<
    (
        Vec<String>,
        Follower<impl FnMut() -> Result<bool, AppError> + '_>,
    ),
    AppError,
> {
    let env = ctx.testenvs.get(id)?;
    let mut containers = Vec::new();
    if !matches!(env.state, EnvState::Deleted { .. })
        && let Ok(engine) = ContainerEngine::connect().await
    {
        for node in &env.nodes {
            let logs = engine.logs(&node.container).await;
            containers.push(format!(
                "{CONTAINER_LOG}{} ({}) ===\n{logs}",
                node.container, node.name
            ));
        }
    }
    let writing = move || Ok(ctx.testenvs.is_busy(id));
    let follower = Follower::new(ctx.testenvs.log_path(id), follow, writing);
    Ok((containers, follower))
}

/// Reads a file that the daemon appends to, one chunk at a time (so a reader holds one
/// chunk, whatever the file's size), as whole UTF-8 text (a split character waits for its
/// remaining bytes); when following, until `writing` says the writer is done.
pub struct Follower<W> {
    path: PathBuf,
    follow: bool,
    writing: W,
    tail: Tail,
    state: State,
}

/// Where a [`Follower`] is.
#[derive(Clone, Copy)]
enum State {
    /// About to ask whether the writer is still at work (before reading, so that what it
    /// wrote before it finished is read).
    Check,
    /// Reading what is there; `writing` is the answer asked before.
    Read { writing: bool },
    /// Everything was read.
    Done,
}

impl<W: FnMut() -> Result<bool, AppError>> Follower<W> {
    /// Reads `path`; with `follow`, also what is added while `writing()` is true.
    pub fn new(path: PathBuf, follow: bool, writing: W) -> Follower<W> {
        Follower {
            path,
            follow,
            writing,
            tail: Tail::default(),
            state: State::Check,
        }
    }

    /// The next piece of text; `None` at the end. Cancel-safe (a call dropped while it
    /// waits for more output loses nothing).
    pub async fn next(&mut self) -> Result<Option<String>, AppError> {
        loop {
            match self.state {
                State::Check => {
                    let writing = (self.writing)()?;
                    self.state = State::Read { writing };
                }
                State::Read { writing } => {
                    if let Some(text) = self.tail.next_chunk(&self.path)? {
                        return Ok(Some(text));
                    }
                    if !self.follow || !writing {
                        self.state = State::Done;
                        continue;
                    }
                    tokio::time::sleep(FOLLOW_POLL).await;
                    self.state = State::Check;
                }
                State::Done => return Ok(self.rest()),
            }
        }
    }

    /// The bytes held back at the end (an incomplete character), replaced: for a stream
    /// that stops early.
    pub fn rest(&mut self) -> Option<String> {
        self.tail.rest()
    }
}

/// The read position in a growing file, and the bytes of a character split by a chunk.
#[derive(Default)]
struct Tail {
    offset: u64,
    pending: Vec<u8>,
}

impl Tail {
    /// The next chunk of text added to the file, or `None` when there is nothing new yet.
    fn next_chunk(&mut self, path: &Path) -> std::io::Result<Option<String>> {
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
    fn rest(&mut self) -> Option<String> {
        if self.pending.is_empty() {
            return None;
        }
        Some(String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_of_a_text_starts_at_its_offset_or_its_tail_and_stops_at_its_end() {
        let text = "0123456789";
        let page = text_page(text, PageStart::At(2), 3, true);
        assert_eq!((page.offset, page.next_offset, page.size), (2, 5, 10));
        assert_eq!(page.text, "234");
        assert!(page.complete);
        let tail = text_page(text, PageStart::Tail(4), usize::MAX, false);
        assert_eq!(
            (tail.offset, tail.next_offset, tail.text.as_str()),
            (6, 10, "6789")
        );
        let past = text_page(text, PageStart::At(99), 5, false);
        assert_eq!(
            (past.offset, past.next_offset, past.text.as_str()),
            (10, 10, "")
        );
        let all = text_page(text, PageStart::Tail(99), usize::MAX, false);
        assert_eq!(all.text, text);
    }

    #[tokio::test]
    async fn a_follower_reads_what_was_written_until_the_writer_is_done_and_keeps_characters_whole()
    {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, "first ").unwrap();
        let mut checks = 0;
        let writing = || {
            checks += 1;
            if checks == 2 {
                // Written while followed: half of a two-byte character, then the rest.
                use std::io::Write as _;
                let mut file = std::fs::OpenOptions::new().append(true).open(&path)?;
                file.write_all("é".as_bytes().get(..1).unwrap())?;
                file.write_all(&"é".as_bytes()[1..])?;
            }
            Ok(checks < 3)
        };
        let mut follower = Follower::new(path.clone(), true, writing);
        let mut text = String::new();
        while let Some(piece) = follower.next().await.unwrap() {
            text.push_str(&piece);
        }
        drop(follower);
        assert_eq!(text, "first é");
        assert_eq!(checks, 3, "asked again after each poll, until done");
    }

    #[tokio::test]
    async fn without_follow_a_follower_reads_what_is_there_once_and_a_split_character_ends_replaced()
     {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, [b'a', 0xC3]).unwrap();
        let mut follower = Follower::new(path, false, || Ok(true));
        assert_eq!(follower.next().await.unwrap().as_deref(), Some("a"));
        assert_eq!(follower.next().await.unwrap().as_deref(), Some("\u{FFFD}"));
        assert_eq!(follower.next().await.unwrap(), None);
    }
}
