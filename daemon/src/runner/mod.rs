//! Runs one attempt of a task as a process in its own process group, and reports what
//! became of it through its own [`Report`] type (the engine depends on the runner, never
//! the reverse).
//!
//! - [`log`]: the task's log file (capped, with a free-space reserve), output read line
//!   by line in bounded pieces, and progress lines.
//! - [`params`]: the private directory of parameters files and the prelude file of Nushell
//!   scripts; how parameters are passed is [`crate::nu_command`]'s, which builds the
//!   process.
//!
//! - [`steering`]: how the daemon steers a launched attempt (cancel, pause, nudges);
//!   [`group`]: the running process group (waiting, pausing, signalling, stopping);
//!   [`input`]: the standard input of a task submitted with `stdin`.
//!
//! - [`supervisor`]: the supervisor process of the data directory, which runs every
//!   attempt (unless supervision is off) and outlives the daemon; [`supervised`]: the
//!   daemon's side of it (start it, hand it attempts, take over after a restart);
//!   [`wire`]: what they share, on disk and on its socket.
//!
//! A timeout or a cancel stops the whole process group: SIGTERM (and SIGCONT, so that a
//! paused group receives it), then SIGKILL after a grace period. A pause stops the group
//! with SIGSTOP until it is resumed (SIGCONT); its timeout keeps counting meanwhile. A
//! signal asked for (`orch kill --signal`) goes to the group as long as its leader has
//! not been reaped.

mod group;
mod input;
mod log;
mod params;
mod steering;
mod supervised;
mod supervisor;
mod wire;

pub use log::{DEFAULT_MAX_LOG_BYTES, log_path};
pub use steering::{Launch, Steered, Steering};
pub use supervised::{Adopted, TakeOverError};
pub use supervisor::{SuperviseError, main as supervisor_main};

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use orch_protocol::{AttemptOutcome, Progress, TaskId, TaskKind};
use tokio::process::Child;
use tokio::sync::mpsc;

use crate::nu_command::{NuCommand, Owner, ParamsFile, Program};
use group::supervise;
use input::Input;
use log::{TaskLog, lock, pump_output};

/// How long output is still read after the main process exited (a background child may
/// hold the pipe open).
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// What the runner says about an attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The task.
    pub id: TaskId,
    /// Which attempt.
    pub attempt: u32,
    /// What happened.
    pub kind: ReportKind,
}

/// What happened to an attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum ReportKind {
    /// The attempt ended (its process exited, was stopped, or could not be started).
    Exited(AttemptOutcome),
    /// The attempt could not start for lack of system resources (descriptors,
    /// processes, memory): not the task's fault. Carries the system's error.
    NotStarted(String),
    /// The task printed a progress line.
    Progress(Progress),
}

/// Settings for running tasks.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
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
    /// Attempts run under the data directory's supervisor process, which outlives the
    /// daemon (see [`supervisor`]); without, attempts are the daemon's children and a
    /// daemon stop interrupts them.
    pub supervise: bool,
    /// The binary supervisors run (the daemon's own).
    pub binary: PathBuf,
    /// How long the supervisor lets attempts run with no daemon connected before it
    /// stops them (`None`: for ever).
    pub supervisor_grace: Option<Duration>,
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

/// Where the reports of one attempt go.
#[derive(Clone)]
struct Reporter {
    reports: Option<mpsc::UnboundedSender<Report>>,
    id: TaskId,
    attempt: u32,
}

impl Reporter {
    fn send(&self, kind: ReportKind) {
        if let Some(reports) = &self.reports {
            let (id, attempt) = (self.id, self.attempt);
            let _ = reports.send(Report { id, attempt, kind });
        }
    }
}

/// Starts attempts and reports what becomes of them.
#[derive(Clone)]
pub struct Runner {
    config: Arc<RunnerConfig>,
    reports: Option<mpsc::UnboundedSender<Report>>,
    /// In the supervisor: its directory, which holds each attempt's parameters file and
    /// `TMPDIR`.
    scratch: Option<wire::SupervisorDir>,
    /// In the daemon: the connection to the supervisor.
    supervision: Arc<supervised::Supervision>,
}

impl Runner {
    /// A runner with these settings; the engine connects its reports. Creates the private
    /// directory of parameters files (removing files a crashed daemon left) and the
    /// prelude of Nushell scripts.
    pub fn new(config: RunnerConfig) -> std::io::Result<Runner> {
        params::prepare_dir(&config)?;
        Ok(Runner {
            config: Arc::new(config),
            reports: None,
            scratch: None,
            supervision: Arc::default(),
        })
    }

    /// The runner of the supervisor whose directory is `dir`, with these settings.
    fn in_supervisor(config: RunnerConfig, dir: wire::SupervisorDir) -> Runner {
        Runner {
            config: Arc::new(config),
            reports: None,
            scratch: Some(dir),
            supervision: Arc::default(),
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

    /// The same runner, sending its reports to `reports`.
    pub fn with_reports(mut self, reports: mpsc::UnboundedSender<Report>) -> Runner {
        self.reports = Some(reports);
        self
    }

    /// Starts the attempt on `runtime`; its progress lines and its end are reported
    /// ([`ReportKind::NotStarted`] when the system lacked the resources to start it).
    pub fn launch(&self, runtime: &tokio::runtime::Handle, launch: Launch) {
        let runner = self.clone();
        runtime.spawn(async move {
            if runner.config.supervise {
                return runner.launch_supervised(launch).await;
            }
            let reporter = runner.reporter(&launch);
            let kind = runner.run_here(launch).await;
            if let ReportKind::NotStarted(reason) = &kind {
                let (task, attempt) = (reporter.id, reporter.attempt);
                tracing::warn!(task, attempt, %reason, "cannot start a task for lack of resources; it will be tried again");
            }
            reporter.send(kind);
        });
    }

    /// Runs the attempt in this process to its end.
    async fn run_here(&self, launch: Launch) -> ReportKind {
        match self.run(launch).await {
            Ok(outcome) => ReportKind::Exited(outcome),
            Err(reason) => ReportKind::NotStarted(reason),
        }
    }

    fn reporter(&self, launch: &Launch) -> Reporter {
        Reporter {
            reports: self.reports.clone(),
            id: launch.id,
            attempt: launch.attempt,
        }
    }

    /// The log of attempt `attempt` of task `id` (shared by its readers of output).
    fn task_log(&self, id: TaskId, attempt: u32) -> log::SharedLog {
        TaskLog::shared(
            log_path(&self.config.logs_dir, id),
            attempt,
            self.config.max_log_bytes,
        )
    }

    /// Runs the attempt to its end; `Err` with the reason when it could not start for
    /// lack of system resources.
    async fn run(&self, mut launch: Launch) -> Result<AttemptOutcome, String> {
        if launch.token.is_cancelled() {
            return Ok(AttemptOutcome::Cancelled);
        }
        let log = self.task_log(launch.id, launch.attempt);
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
        let mut input = Input::start(child.stdin.take(), log.clone());
        let progress = Some(self.reporter(&launch));
        let mut out = tokio::spawn(pump_output(stdout, log.clone(), progress));
        let mut err = tokio::spawn(pump_output(stderr, log, None));
        let outcome = supervise(&mut child, &mut launch, &mut input).await;
        input.close();
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

    /// Starts the attempt's process (built by [`NuCommand`], like every process the
    /// daemon runs for others); the parameters file (if any) must live until it ends.
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
        let key = (launch.id, launch.attempt);
        let params_file = match &self.scratch {
            Some(dir) => dir.params_file(key),
            None => self
                .config
                .params_dir()
                .join(format!("{}-{}.json", launch.id, launch.attempt)),
        };
        let mut command = NuCommand::new(
            &self.config.nu_binary,
            program,
            owner,
            &self.config.data_dir,
        )
        .cwd(spec.cwd.as_deref().unwrap_or(&self.config.data_dir));
        // A workflow step's provider drives the engine the daemon finds now (when the
        // daemon was given none), decided at each launch rather than kept in the record.
        if spec.workflow.is_some()
            && let Some(host) = crate::testenv::engine::usual_socket()
        {
            command = command.env("DOCKER_HOST", host);
        }
        // Nushell tasks (the provisioning logic, whose providers write temporary files) get
        // a private TMPDIR, removed when the attempt ends; plain commands keep the usual
        // one (a directory made and removed per attempt would cost as much as their start).
        let nushell = !matches!(spec.kind, TaskKind::Command { .. });
        if let Some(dir) = self
            .scratch
            .as_ref()
            .filter(|_| nushell && !spec.env.contains_key("TMPDIR"))
        {
            let tmp = dir.scratch(key);
            crate::files::create_private_dir(&tmp)
                .map_err(|e| StartError::of(&tmp.display().to_string(), &e))?;
            command = command.env("TMPDIR", tmp);
        }
        let (mut process, params_file) = command
            .envs(&spec.env)
            .build(&spec.params, &params_file)
            .map_err(|e| StartError::of(&params_file.display().to_string(), &e))?;
        process
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(false);
        if spec.stdin {
            process.stdin(Stdio::piped());
        }
        let child = process.spawn().map_err(|e| match &spec.kind {
            TaskKind::Command { program, .. } => StartError::of(program, &e),
            _ => StartError::of(&self.config.nu_binary.display().to_string(), &e),
        })?;
        Ok((child, params_file))
    }
}
