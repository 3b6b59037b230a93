//! A task's output: read line by line (a line longer than [`MAX_LINE`] in pieces of that
//! size) into its log file, which is created on the first byte (a silent task leaves no
//! file) and capped in size, with a free-space reserve kept for the store; a line of
//! standard output that follows the progress convention is also reported.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use orch_protocol::{Progress, TaskId};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};

use super::{ReportKind, Reporter};

/// The longest piece of output handled as one line: a longer line is logged in pieces of
/// this size, and is never a progress line.
pub const MAX_LINE: usize = 64 * 1024;

/// The default cap on a task's log file, in bytes.
pub const DEFAULT_MAX_LOG_BYTES: u64 = 1024 * 1024 * 1024;

/// How much free space task logs leave on their file system (at most a quarter of it).
const DISK_RESERVE: u64 = 64 * 1024 * 1024;

/// How often (in bytes written to a log) the free space is checked.
const DISK_CHECK_EVERY: u64 = 1024 * 1024;

/// The log file of task `id` in `logs_dir`.
pub fn log_path(logs_dir: &Path, id: TaskId) -> PathBuf {
    logs_dir.join(format!("{id}.log"))
}

/// A task's log file, opened (in append mode) when the first byte arrives; later attempts
/// start with a header line. It grows to `limit` bytes at most: what comes after is
/// discarded, after one line saying so. A write error (such as a full disk) stops the
/// logging of this attempt, and nothing else.
pub(super) struct TaskLog {
    path: PathBuf,
    header: Option<String>,
    file: Option<File>,
    /// The file's size so far.
    size: u64,
    limit: u64,
    /// The size at which free disk space is checked next.
    next_check: u64,
    /// Nothing more is written (the limit was reached, or a write failed).
    closed: bool,
}

/// A task's log shared by the readers of its standard output and error.
pub(super) type SharedLog = Arc<Mutex<TaskLog>>;

impl TaskLog {
    /// The log at `path` of attempt `attempt`, capped at `limit` bytes.
    pub(super) fn shared(path: PathBuf, attempt: u32, limit: u64) -> SharedLog {
        let header = (attempt > 1).then(|| format!("--- orch: attempt {attempt} ---\n"));
        Arc::new(Mutex::new(TaskLog {
            path,
            header,
            file: None,
            size: 0,
            limit,
            next_check: 0,
            closed: false,
        }))
    }

    /// Appends `bytes` (what fits under the cap).
    pub(super) fn write(&mut self, bytes: &[u8]) {
        if self.closed {
            return;
        }
        if let Err(e) = self.try_write(bytes) {
            tracing::warn!(log = %self.path.display(), error = %e, "cannot write a task's log; the rest of this attempt's output is discarded");
            self.closed = true;
        }
    }

    fn try_write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.file.is_none() {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&self.path)?;
            self.size = file.metadata()?.len();
            self.file = Some(file);
            if self.size >= self.limit {
                // An earlier attempt filled it (and said so).
                self.closed = true;
                return Ok(());
            }
            if let Some(header) = self.header.take() {
                self.append(header.as_bytes())?;
            }
        }
        self.append(bytes)
    }

    /// Appends what fits under the limit; at the limit, or when the disk is nearly full,
    /// the marker line.
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.size >= self.next_check {
            self.next_check = self.size + DISK_CHECK_EVERY;
            if self.disk_nearly_full() {
                return self.close_with("the disk is nearly full (the store needs the space)");
            }
        }
        let room = self.limit.saturating_sub(self.size);
        let fits = bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let file = self.file.as_mut().expect("opened before appending");
        file.write_all(&bytes[..fits])?;
        self.size += fits as u64;
        if fits < bytes.len() {
            let why = format!("the log reached its limit of {} bytes", self.limit);
            return self.close_with(&why);
        }
        Ok(())
    }

    /// Writes the marker line saying why later output is discarded, and stops writing.
    fn close_with(&mut self, why: &str) -> std::io::Result<()> {
        self.closed = true;
        tracing::warn!(log = %self.path.display(), "{why}; the rest of the task's output is discarded");
        let marker = format!("\n--- orch: {why}; further output is discarded ---\n");
        let file = self.file.as_mut().expect("opened before appending");
        file.write_all(marker.as_bytes())?;
        self.size += marker.len() as u64;
        Ok(())
    }

    /// True when the log's file system has less free space than the reserve kept for the
    /// store: the smaller of [`DISK_RESERVE`] and a quarter of the file system.
    fn disk_nearly_full(&self) -> bool {
        let Some(dir) = self.path.parent() else {
            return false;
        };
        match free_space(dir) {
            Some((free, total)) => free < DISK_RESERVE.min(total / 4),
            None => false,
        }
    }
}

/// The free space (for unprivileged users) and the size of the file system of `dir`.
fn free_space(dir: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a NUL-terminated string and `stat` a buffer of the right type,
    // which statvfs(3) fills when it returns 0.
    let stat = unsafe {
        if libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) != 0 {
            return None;
        }
        stat.assume_init()
    };
    let block = stat.f_frsize as u64;
    Some((
        (stat.f_bavail as u64).saturating_mul(block),
        (stat.f_blocks as u64).saturating_mul(block),
    ))
}

/// The log, even if a writer panicked while holding it.
pub(super) fn lock(log: &Mutex<TaskLog>) -> std::sync::MutexGuard<'_, TaskLog> {
    log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Copies one output stream to the task's log, line by line (a line longer than
/// [`MAX_LINE`] in pieces); with `progress`, progress lines are also reported.
pub(super) async fn pump_output(
    stream: impl AsyncRead + Unpin,
    log: SharedLog,
    progress: Option<Reporter>,
) {
    let mut reader = BufReader::new(stream);
    let mut line = Vec::with_capacity(256);
    // The previous piece ended a line: this one starts one.
    let mut at_line_start = true;
    loop {
        line.clear();
        let piece = (&mut reader)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
            .await;
        match piece {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                lock(&log).write(&line);
                let whole = at_line_start && (line.ends_with(b"\n") || line.len() < MAX_LINE);
                at_line_start = line.ends_with(b"\n");
                if !whole {
                    continue;
                }
                if let (Some(reporter), Some(p)) = (&progress, parse_progress(&line)) {
                    reporter.send(ReportKind::Progress(p));
                }
            }
        }
    }
}

/// The progress convention: one line holding a JSON object with a numeric `progress`
/// (percent, 0 to 100) and/or a `message`, e.g. `{"progress": 40, "message": "installing"}`.
pub fn parse_progress(line: &[u8]) -> Option<Progress> {
    let trimmed = line.trim_ascii();
    if !trimmed.starts_with(b"{") || !memfind(trimmed, b"\"progress\"") {
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(trimmed).ok()?;
    let object = value.as_object()?;
    let percent = object.get("progress")?.as_f64()?.clamp(0.0, 100.0);
    let message = object
        .get("message")
        .and_then(|m| m.as_str())
        .map(str::to_string);
    Some(Progress {
        percent: Some(percent),
        message,
    })
}

fn memfind(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_follow_the_convention() {
        let p = parse_progress(b"{\"progress\": 40, \"message\": \"installing\"}\n").unwrap();
        assert_eq!(p.percent, Some(40.0));
        assert_eq!(p.message.as_deref(), Some("installing"));
        assert_eq!(
            parse_progress(b"{\"progress\": 250}").unwrap().percent,
            Some(100.0)
        );
        assert!(parse_progress(b"progress: 40").is_none());
        assert!(parse_progress(b"{\"other\": 1}").is_none());
        assert!(parse_progress(b"{\"progress\": \"lots\"}").is_none());
    }
}
