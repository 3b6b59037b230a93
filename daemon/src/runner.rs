//! Runs one attempt of a task as a process in its own process group.
//!
//! Standard output and error are read line by line into the task's log file, which is
//! created on the first byte (a silent task leaves no file); a line of standard output
//! that is a JSON object with a `progress` field also becomes a progress event. A timeout or a cancel stops the whole
//! process group: SIGTERM, then SIGKILL after a grace period.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orch_protocol::{AttemptOutcome, Progress, TaskId, TaskKind, TaskSpec};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command as Process};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::engine::Command;

/// How long a stopped process group gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(3);

/// How long output is still read after the main process exited (a background child may
/// hold the pipe open).
const DRAIN_GRACE: Duration = Duration::from_millis(500);

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
    /// A runner with these settings; the engine connects its mailbox.
    pub fn new(config: RunnerConfig) -> Runner {
        Runner {
            config: Arc::new(config),
            mailbox: None,
        }
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
    /// [`Command::Exited`].
    pub fn launch(&self, runtime: &tokio::runtime::Handle, launch: Launch) {
        let runner = self.clone();
        runtime.spawn(async move {
            let (id, attempt) = (launch.id, launch.attempt);
            let outcome = runner.run(launch).await;
            runner.send(Command::Exited {
                id,
                attempt,
                outcome,
            });
        });
    }

    fn send(&self, command: Command) {
        if let Some(mailbox) = &self.mailbox {
            let _ = mailbox.send(command);
        }
    }

    async fn run(&self, launch: Launch) -> AttemptOutcome {
        if launch.token.is_cancelled() {
            return AttemptOutcome::Cancelled;
        }
        let log = Arc::new(Mutex::new(TaskLog::new(
            log_path(&self.config.logs_dir, launch.id),
            launch.attempt,
        )));
        let mut child = match self.spawn(&launch) {
            Ok(child) => child,
            Err(error) => {
                let line = format!("orch: could not start the task: {error}\n");
                lock(&log).write(line.as_bytes());
                return AttemptOutcome::SpawnFailed { error };
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
        outcome
    }

    fn spawn(&self, launch: &Launch) -> Result<Child, String> {
        let spec = &launch.spec;
        let mut process = match &spec.kind {
            TaskKind::Command { program, args } => {
                let mut p = Process::new(program);
                p.args(args);
                p
            }
            TaskKind::Nu { code } => {
                let mut p = Process::new(&self.config.nu_binary);
                let script = format!("let params = ($env.ORCH_PARAMS | from json)\n{code}");
                p.args(["-n", "-c", &script]);
                p
            }
            TaskKind::NuFile { path } => {
                let mut p = Process::new(&self.config.nu_binary);
                p.arg("-n").arg(path);
                p
            }
        };
        let params = serde_json::to_string(&spec.params).expect("JSON values serialize");
        process
            .current_dir(spec.cwd.as_deref().unwrap_or(&self.config.data_dir))
            .envs(&spec.env)
            .env("ORCH_TASK_ID", launch.id.to_string())
            .env("ORCH_ATTEMPT", launch.attempt.to_string())
            .env("ORCH_PARAMS", params)
            .env(crate::orphans::DATA_DIR_ENV, &self.config.data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(false);
        crate::files::restore_umask(&mut process);
        process.spawn().map_err(|e| match &spec.kind {
            TaskKind::Command { program, .. } => format!("{program}: {e}"),
            _ => format!("{}: {e}", self.config.nu_binary.display()),
        })
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
/// start with a header line.
struct TaskLog {
    path: PathBuf,
    header: Option<String>,
    file: Option<File>,
    failed: bool,
}

impl TaskLog {
    fn new(path: PathBuf, attempt: u32) -> TaskLog {
        let header = (attempt > 1).then(|| format!("--- orch: attempt {attempt} ---\n"));
        TaskLog {
            path,
            header,
            file: None,
            failed: false,
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.failed {
            return;
        }
        if let Err(e) = self.try_write(bytes) {
            tracing::warn!(log = %self.path.display(), error = %e, "cannot write a task's log");
            self.failed = true;
        }
    }

    fn try_write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.file.is_none() {
            let mut file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?;
            if let Some(header) = self.header.take() {
                file.write_all(header.as_bytes())?;
            }
            self.file = Some(file);
        }
        self.file.as_mut().expect("opened above").write_all(bytes)
    }
}

fn lock(log: &Mutex<TaskLog>) -> std::sync::MutexGuard<'_, TaskLog> {
    log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Copies one output stream to the task's log, line by line; with `progress`, progress
/// lines also become events.
async fn pump_output(
    stream: impl AsyncRead + Unpin,
    log: Arc<Mutex<TaskLog>>,
    progress: Option<(Runner, TaskId, u32)>,
) {
    let mut reader = BufReader::new(stream);
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                lock(&log).write(&line);
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
