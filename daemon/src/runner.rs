//! Runs one attempt of a task as a process in its own process group.
//!
//! Standard output and error are read line by line (a line longer than [`MAX_LINE`] in
//! pieces of that size) into the task's log file, which is created on the first byte (a
//! silent task leaves no file) and capped in size; a line of standard output that is a
//! JSON object with a `progress` field also becomes a progress event. A timeout or a
//! cancel stops the whole process group: SIGTERM, then SIGKILL after a grace period.
//!
//! Parameters reach the task as JSON in `ORCH_PARAMS`, or, when they are too large for
//! one environment variable, in a private file named by `ORCH_PARAMS_FILE` (removed when
//! the attempt ends); the Nushell prelude reads either into `$params`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orch_protocol::{AttemptOutcome, Progress, TaskId, TaskKind, TaskSpec};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::process::Child;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::engine::Command;
use crate::nu_command::{NuCommand, Owner, ParamsFile, Program};

/// How long a stopped process group gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(3);

/// How long output is still read after the main process exited (a background child may
/// hold the pipe open).
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// The longest piece of output handled as one line: a longer line is logged in pieces of
/// this size, and is never a progress line.
pub const MAX_LINE: usize = 64 * 1024;

/// The default cap on a task's log file, in bytes.
pub const DEFAULT_MAX_LOG_BYTES: u64 = 1024 * 1024 * 1024;

/// The Nushell prelude (re-exported: the engine sizes snippets with it).
pub use crate::nu_command::PRELUDE;

/// One attempt to start.
pub struct Launch {
    /// The task.
    pub id: TaskId,
    /// Which attempt (1-based).
    pub attempt: u32,
    /// What to run.
    pub spec: TaskSpec,
    /// Cancelled to stop the attempt.
    pub token: CancellationToken,
}

/// Settings for running tasks.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// The `nu` binary for Nushell tasks.
    pub nu_binary: PathBuf,
    /// Where per-task log files go.
    pub logs_dir: PathBuf,
    /// The daemon's data directory: the working directory of tasks that do not name one,
    /// and the owner marker in every task's environment (see [`crate::orphans`]).
    pub data_dir: PathBuf,
    /// The largest a task's log file may grow (all attempts together); later output is
    /// discarded, after one line saying so.
    pub max_log_bytes: u64,
}

impl RunnerConfig {
    /// Where the parameters files of running attempts are kept (private).
    fn params_dir(&self) -> PathBuf {
        crate::nu_command::params_dir(&self.data_dir)
    }

    /// The prelude file Nushell scripts are started with (`nu --env-config`).
    fn prelude_path(&self) -> PathBuf {
        self.params_dir().join("prelude.nu")
    }
}

/// Why an attempt could not be started.
enum StartError {
    /// The system is out of file descriptors or processes: not the task's fault.
    Exhausted(String),
    /// Anything else (no such program, not executable, ...): a failed attempt.
    Failed(String),
}

impl StartError {
    /// Classifies `error`, met while starting the attempt; `what` names what was started.
    fn of(what: &str, error: &std::io::Error) -> StartError {
        let message = format!("{what}: {error}");
        match error.raw_os_error() {
            Some(libc::EMFILE | libc::ENFILE | libc::EAGAIN | libc::ENOMEM) => {
                StartError::Exhausted(message)
            }
            _ => StartError::Failed(message),
        }
    }
}

/// Starts attempts and reports their ends to the engine.
#[derive(Clone)]
pub struct Runner {
    config: Arc<RunnerConfig>,
    mailbox: Option<mpsc::UnboundedSender<Command>>,
}

/// The log file of task `id` in `logs_dir`.
pub fn log_path(logs_dir: &Path, id: TaskId) -> PathBuf {
    logs_dir.join(format!("{id}.log"))
}

impl Runner {
    /// A runner with these settings; the engine connects its mailbox. Creates the private
    /// directory of parameters files (removing files a crashed daemon left) and the
    /// prelude of Nushell scripts.
    pub fn new(config: RunnerConfig) -> std::io::Result<Runner> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = config.params_dir();
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        crate::files::write_atomically(&config.prelude_path(), PRELUDE.as_bytes(), 0o600)?;
        Ok(Runner {
            config: Arc::new(config),
            mailbox: None,
        })
    }

    /// Deletes the log of a removed task (a task that printed nothing has none).
    pub fn remove_log(&self, id: TaskId) {
        let path = log_path(&self.config.logs_dir, id);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                tracing::warn!(log = %path.display(), error = %e, "cannot delete a task's log");
            }
            _ => {}
        }
    }

    /// The daemon's data directory.
    pub fn data_dir(&self) -> &Path {
        &self.config.data_dir
    }

    /// The same runner, reporting to `mailbox`.
    pub fn with_mailbox(mut self, mailbox: mpsc::UnboundedSender<Command>) -> Runner {
        self.mailbox = Some(mailbox);
        self
    }

    /// Starts the attempt on `runtime`; its end is sent to the engine as
    /// [`Command::Exited`], or as [`Command::NotStarted`] when the system lacked the
    /// resources to start it.
    pub fn launch(&self, runtime: &tokio::runtime::Handle, launch: Launch) {
        let runner = self.clone();
        runtime.spawn(async move {
            let (id, attempt) = (launch.id, launch.attempt);
            let command = match runner.run(launch).await {
                Ok(outcome) => Command::Exited {
                    id,
                    attempt,
                    outcome,
                },
                Err(reason) => {
                    tracing::warn!(task = id, attempt, %reason, "cannot start a task for lack of resources; it will be tried again");
                    Command::NotStarted {
                        id,
                        attempt,
                        reason,
                    }
                }
            };
            runner.send(command);
        });
    }

    fn send(&self, command: Command) {
        if let Some(mailbox) = &self.mailbox {
            let _ = mailbox.send(command);
        }
    }

    /// Runs the attempt to its end; `Err` with the reason when it could not start for
    /// lack of system resources.
    async fn run(&self, launch: Launch) -> Result<AttemptOutcome, String> {
        if launch.token.is_cancelled() {
            return Ok(AttemptOutcome::Cancelled);
        }
        let log = Arc::new(Mutex::new(TaskLog::new(
            log_path(&self.config.logs_dir, launch.id),
            launch.attempt,
            self.config.max_log_bytes,
        )));
        let (mut child, _params_file) = match self.spawn(&launch) {
            Ok(started) => started,
            Err(StartError::Exhausted(reason)) => return Err(reason),
            Err(StartError::Failed(error)) => {
                let line = format!("orch: could not start the task: {error}\n");
                lock(&log).write(line.as_bytes());
                return Ok(AttemptOutcome::SpawnFailed { error });
            }
        };
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let progress = Some((self.clone(), launch.id, launch.attempt));
        let mut out = tokio::spawn(pump_output(stdout, log.clone(), progress));
        let mut err = tokio::spawn(pump_output(stderr, log, None));
        let outcome = supervise(&mut child, launch.spec.timeout_ms, &launch.token).await;
        // Output after the process ended is still logged, for a short while; a background
        // child that keeps the pipes open is not followed further (its output is dropped,
        // and the pipes are closed on our side).
        let drained = tokio::time::timeout(DRAIN_GRACE, async {
            let _ = (&mut out).await;
            let _ = (&mut err).await;
        })
        .await;
        if drained.is_err() {
            out.abort();
            err.abort();
        }
        Ok(outcome)
    }

    /// Starts the attempt's process; the parameters file (if any) must live until it ends.
    fn spawn(&self, launch: &Launch) -> Result<(Child, Option<ParamsFile>), StartError> {
        let spec = &launch.spec;
        let prelude = self.config.prelude_path();
        let program = match &spec.kind {
            TaskKind::Command { program, args } => Program::Plain { program, args },
            TaskKind::Nu { code } => Program::Snippet(code),
            TaskKind::NuFile { path } => Program::Script {
                prelude: &prelude,
                script: path,
            },
        };
        let owner = Owner::Task {
            id: launch.id,
            attempt: launch.attempt,
        };
        let params_file = self
            .config
            .params_dir()
            .join(format!("{}-{}.json", launch.id, launch.attempt));
        let (mut process, params_file) = NuCommand::new(
            &self.config.nu_binary,
            program,
            owner,
            &self.config.data_dir,
        )
        .cwd(spec.cwd.as_deref().unwrap_or(&self.config.data_dir))
        .envs(&spec.env)
        .build(&spec.params, &params_file)
        .map_err(|e| StartError::of(&params_file.display().to_string(), &e))?;
        process
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(false);
        let child = process.spawn().map_err(|e| match &spec.kind {
            TaskKind::Command { program, .. } => StartError::of(program, &e),
            _ => StartError::of(&self.config.nu_binary.display().to_string(), &e),
        })?;
        Ok((child, params_file))
    }
}

/// Waits for the process, its timeout, or a cancel, whichever comes first.
async fn supervise(
    child: &mut Child,
    timeout_ms: Option<u64>,
    token: &CancellationToken,
) -> AttemptOutcome {
    let timeout = async {
        match timeout_ms {
            Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        status = child.wait() => match status {
            Ok(status) => outcome_of(status),
            Err(e) => AttemptOutcome::SpawnFailed { error: e.to_string() },
        },
        () = timeout => {
            stop_group(child).await;
            AttemptOutcome::TimedOut { after_ms: timeout_ms.unwrap_or_default() }
        }
        () = token.cancelled() => {
            stop_group(child).await;
            AttemptOutcome::Cancelled
        }
    }
}

fn outcome_of(status: ExitStatus) -> AttemptOutcome {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => AttemptOutcome::Exited { code },
        (None, Some(signal)) => AttemptOutcome::Signalled { signal },
        (None, None) => AttemptOutcome::Exited { code: -1 },
    }
}

/// SIGTERM to the whole group, SIGKILL after the grace period, and reap the child.
async fn stop_group(child: &mut Child) {
    let Some(pid) = child.id() else { return };
    signal_group(pid, libc::SIGTERM);
    if tokio::time::timeout(KILL_GRACE, child.wait())
        .await
        .is_err()
    {
        signal_group(pid, libc::SIGKILL);
        let _ = child.wait().await;
    }
    // Members of the group that outlived the leader get no second chance.
    signal_group(pid, libc::SIGKILL);
}

fn signal_group(pgid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) has no memory-safety preconditions; a negative pid names the group
    // that `process_group(0)` created with the child's pid as its id.
    unsafe {
        libc::kill(-(pgid as libc::pid_t), signal);
    }
}

/// A task's log file, opened (in append mode) when the first byte arrives; later attempts
/// start with a header line. It grows to `limit` bytes at most: what comes after is
/// discarded, after one line saying so. A write error (such as a full disk) stops the
/// logging of this attempt, and nothing else.
struct TaskLog {
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

impl TaskLog {
    fn new(path: PathBuf, attempt: u32, limit: u64) -> TaskLog {
        let header = (attempt > 1).then(|| format!("--- orch: attempt {attempt} ---\n"));
        TaskLog {
            path,
            header,
            file: None,
            size: 0,
            limit,
            next_check: 0,
            closed: false,
        }
    }

    fn write(&mut self, bytes: &[u8]) {
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

/// How much free space task logs leave on their file system (at most a quarter of it).
const DISK_RESERVE: u64 = 64 * 1024 * 1024;

/// How often (in bytes written to a log) the free space is checked.
const DISK_CHECK_EVERY: u64 = 1024 * 1024;

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

fn lock(log: &Mutex<TaskLog>) -> std::sync::MutexGuard<'_, TaskLog> {
    log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Copies one output stream to the task's log, line by line (a line longer than
/// [`MAX_LINE`] in pieces); with `progress`, progress lines also become events.
async fn pump_output(
    stream: impl AsyncRead + Unpin,
    log: Arc<Mutex<TaskLog>>,
    progress: Option<(Runner, TaskId, u32)>,
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
                if let (Some((runner, id, attempt)), Some(p)) = (&progress, parse_progress(&line)) {
                    runner.send(Command::Progress {
                        id: *id,
                        attempt: *attempt,
                        progress: p,
                    });
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
        assert!(parse_progress(b"{\"progress\": \"lots\"}").is_none());
        assert!(parse_progress(b"{\"other\": 1}").is_none());
    }
}
