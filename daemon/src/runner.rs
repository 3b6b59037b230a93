//! Runs one attempt of a task as a process in its own process group.
//!
//! Standard output is read line by line: each line goes to the task's log file, and a
//! line that is a JSON object with a `progress` field becomes a progress event. Standard
//! error goes straight to the same log file. A timeout or a cancel stops the whole
//! process group: SIGTERM, then SIGKILL after a grace period.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use orch_protocol::{AttemptOutcome, Progress, TaskId, TaskKind, TaskSpec};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command as Process};
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
    /// The working directory of tasks that do not name one.
    pub default_cwd: PathBuf,
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
        let mut log = match self.open_log(&launch) {
            Ok(log) => log,
            Err(e) => {
                return AttemptOutcome::SpawnFailed {
                    error: format!("cannot open the log file: {e}"),
                };
            }
        };
        let mut child = match self.spawn(&launch, &log) {
            Ok(child) => child,
            Err(error) => {
                let _ = writeln!(log, "orch: could not start the task: {error}");
                return AttemptOutcome::SpawnFailed { error };
            }
        };
        if let Some(pid) = child.id() {
            self.send(Command::Spawned {
                id: launch.id,
                attempt: launch.attempt,
                process_group: pid,
            });
        }
        let stdout = child.stdout.take().expect("stdout is piped");
        let pump = tokio::spawn(pump_output(
            stdout,
            log,
            self.clone(),
            launch.id,
            launch.attempt,
        ));
        let outcome = supervise(&mut child, launch.spec.timeout_ms, &launch.token).await;
        // Output after the process ended is still logged, for a short while.
        let _ = tokio::time::timeout(DRAIN_GRACE, pump).await;
        outcome
    }

    fn open_log(&self, launch: &Launch) -> std::io::Result<File> {
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path(&self.config.logs_dir, launch.id))?;
        if launch.attempt > 1 {
            writeln!(log, "--- orch: attempt {} ---", launch.attempt)?;
        }
        Ok(log)
    }

    fn spawn(&self, launch: &Launch, log: &File) -> Result<Child, String> {
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
        let stderr = log.try_clone().map_err(|e| e.to_string())?;
        process
            .current_dir(spec.cwd.as_deref().unwrap_or(&self.config.default_cwd))
            .envs(&spec.env)
            .env("ORCH_TASK_ID", launch.id.to_string())
            .env("ORCH_ATTEMPT", launch.attempt.to_string())
            .env("ORCH_PARAMS", params)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .process_group(0)
            .kill_on_drop(false);
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

/// Copies the task's output to its log and turns progress lines into events.
async fn pump_output(stdout: ChildStdout, mut log: File, runner: Runner, id: TaskId, attempt: u32) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if log.write_all(&line).is_err() {
                    tracing::warn!(task = id, "cannot write to the task's log");
                }
                if let Some(progress) = parse_progress(&line) {
                    runner.send(Command::Progress {
                        id,
                        attempt,
                        progress,
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
