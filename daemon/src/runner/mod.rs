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
//! - [`supervisor`]: the supervisor process of the data directory, which runs every
//!   attempt (unless supervision is off) and outlives the daemon; [`supervised`]: the
//!   daemon's side of it (start it, hand it attempts, take over after a restart);
//!   [`wire`]: what they share, on disk and on its socket.
//!
//! A timeout or a cancel stops the whole process group: SIGTERM (and SIGCONT, so that a
//! paused group receives it), then SIGKILL after a grace period. A pause stops the group
//! with SIGSTOP until it is resumed (SIGCONT); its timeout keeps counting meanwhile. A
//! signal asked for (`orch kill --signal`) goes to the group as long as its leader has
//! not been reaped. [`input`]: the standard input of a task submitted with `stdin`.

mod input;
mod log;
mod params;
mod supervised;
mod supervisor;
mod wire;

pub use log::{DEFAULT_MAX_LOG_BYTES, log_path};
pub use supervised::{Adopted, TakeOverError};
pub use supervisor::{SuperviseError, main as supervisor_main};

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use orch_protocol::{AttemptOutcome, Nudge, Progress, TaskId, TaskKind, TaskSignal, TaskSpec};
use tokio::process::Child;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::nu_command::{NuCommand, Owner, ParamsFile, Program};
use input::Input;
use log::{TaskLog, lock, pump_output};

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
    /// True while the attempt is to be paused (its process group stopped).
    pub paused: watch::Receiver<bool>,
    /// Signals for its process group and input for its standard input.
    pub nudges: mpsc::UnboundedReceiver<Nudge>,
}

/// How the daemon steers an attempt it launched: its cancel, and whether it is paused.
pub struct Steering {
    /// Cancelled to stop the attempt.
    pub token: CancellationToken,
    /// True while the attempt is to be paused.
    paused: watch::Sender<bool>,
    /// Signals for its process group and input for its standard input.
    nudges: mpsc::UnboundedSender<Nudge>,
    /// An adopted attempt's: whatever it is, its first value is passed on (its processes
    /// may be stopped or not whatever the daemon last asked).
    unsure: std::sync::atomic::AtomicBool,
}

impl Steering {
    /// A new attempt's steering (running, not paused) and the launch's end of it: its
    /// pause and its nudges.
    pub fn new() -> (Steering, Steered) {
        let (paused, paused_rx) = watch::channel(false);
        let (nudges, nudges_rx) = mpsc::unbounded_channel();
        let steering = Steering {
            token: CancellationToken::new(),
            paused,
            nudges,
            unsure: false.into(),
        };
        (steering, (paused_rx, nudges_rx))
    }

    /// An adopted attempt's steering: its first [`Self::set_paused`] is passed on even if
    /// it says what the steering says already.
    pub fn of(
        token: CancellationToken,
        paused: watch::Sender<bool>,
        nudges: mpsc::UnboundedSender<Nudge>,
    ) -> Steering {
        Steering {
            token,
            paused,
            nudges,
            unsure: true.into(),
        }
    }

    /// Passes `nudge` on to the attempt (nothing once it has ended).
    pub fn nudge(&self, nudge: Nudge) {
        let _ = self.nudges.send(nudge);
    }

    /// Pauses (`true`) or resumes the attempt; nothing is sent when it is so already
    /// (except the first time for an adopted attempt).
    pub fn set_paused(&self, paused: bool) {
        if self.unsure.swap(false, std::sync::atomic::Ordering::SeqCst) {
            self.paused.send_replace(paused);
            return;
        }
        self.paused
            .send_if_modified(|now| std::mem::replace(now, paused) != paused);
    }
}

/// The launch's end of a [`Steering`]: whether it is paused, and its nudges.
pub type Steered = (watch::Receiver<bool>, mpsc::UnboundedReceiver<Nudge>);

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

/// Waits for the process, its timeout, or a cancel, whichever comes first; pauses and
/// resumes its process group as `launch.paused` says meanwhile, and passes signals and
/// input (to `input`) on.
async fn supervise(child: &mut Child, launch: &mut Launch, input: &mut Input) -> AttemptOutcome {
    let timeout_ms = launch.spec.timeout_ms;
    let timeout = async {
        match timeout_ms {
            Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timeout);
    let mut paused = launch.paused.clone();
    let mut pause_open = true;
    let mut nudges_open = true;
    if *paused.borrow_and_update() {
        pause_group(child, true);
    }
    loop {
        tokio::select! {
            status = child.wait() => return match status {
                Ok(status) => outcome_of(status),
                Err(e) => AttemptOutcome::SpawnFailed { error: e.to_string() },
            },
            () = &mut timeout => {
                stop_group(child).await;
                return AttemptOutcome::TimedOut { after_ms: timeout_ms.unwrap_or_default() };
            }
            () = launch.token.cancelled() => {
                stop_group(child).await;
                return AttemptOutcome::Cancelled;
            }
            changed = paused.changed(), if pause_open => match changed {
                Ok(()) => pause_group(child, *paused.borrow_and_update()),
                Err(_) => pause_open = false, // no one steers it any more
            },
            nudge = launch.nudges.recv(), if nudges_open => match nudge {
                // `id` is None once the process is reaped: its group id may be reused.
                Some(Nudge::Signal(signal)) => if let Some(pid) = child.id() {
                    tracing::info!(task = launch.id, attempt = launch.attempt, %signal, "signalling a task");
                    signal_group(pid, signal_number(signal));
                },
                Some(Nudge::Input { data, eof }) => input.send(data, eof),
                None => nudges_open = false,
            },
        }
    }
}

/// Stops (`paused`: SIGSTOP) or continues (SIGCONT) the attempt's process group.
fn pause_group(child: &Child, paused: bool) {
    if let Some(pid) = child.id() {
        signal_group(pid, if paused { libc::SIGSTOP } else { libc::SIGCONT });
    }
}

/// `signal`'s number on this system.
fn signal_number(signal: TaskSignal) -> libc::c_int {
    match signal {
        TaskSignal::Hup => libc::SIGHUP,
        TaskSignal::Int => libc::SIGINT,
        TaskSignal::Quit => libc::SIGQUIT,
        TaskSignal::Kill => libc::SIGKILL,
        TaskSignal::Usr1 => libc::SIGUSR1,
        TaskSignal::Usr2 => libc::SIGUSR2,
        TaskSignal::Alrm => libc::SIGALRM,
        TaskSignal::Term => libc::SIGTERM,
        TaskSignal::Winch => libc::SIGWINCH,
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
    // A paused group would hold the TERM until it is continued.
    signal_group(pid, libc::SIGCONT);
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
