//! The daemon's side of supervised attempts: it starts each attempt's supervisor (see
//! [`super::supervisor`]) and follows it over its socket (progress lines in, a cancel
//! out); at start it takes over the supervisors a previous daemon left, collects the
//! outcomes of attempts that ended meanwhile, and stops supervisors of attempts the store
//! does not know.

use std::collections::HashSet;
use std::process::Stdio;

use orch_protocol::{AttemptOutcome, TaskId};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixStream;
use tokio::process::Child;
use tokio_util::sync::CancellationToken;

use super::attempt_dir::{self, AttemptDir, LaunchFile, Message};
use super::log::{TaskLog, lock};
use super::{Launch, ReportKind, Reporter, Runner, StartError, log_path};

/// An attempt left running (or ended) under a supervisor, which this daemon now follows.
pub struct Adopted {
    /// The task.
    pub id: TaskId,
    /// Which attempt.
    pub attempt: u32,
    /// Cancelled to stop it.
    pub token: CancellationToken,
    /// False for an attempt the previous daemon recorded as running but died before
    /// launching (no supervisor ever bound its socket): it is reported as not started, and is tried
    /// again without using an attempt; the processes a daemon without supervisors may
    /// have left for it must be stopped first.
    pub launched: bool,
}

impl Runner {
    /// Runs the attempt under a new supervisor and follows it to its end.
    pub(super) async fn run_supervised(&self, launch: Launch) -> ReportKind {
        if launch.token.is_cancelled() {
            return ReportKind::Exited(AttemptOutcome::Cancelled);
        }
        let dir = AttemptDir::of(&self.config.data_dir, launch.id, launch.attempt);
        let reporter = self.reporter(&launch);
        match self.start_supervisor(&dir, &launch).await {
            Ok((stream, child)) => {
                self.follow(dir, stream, launch.token, reporter, Some(child))
                    .await
            }
            Err(StartError::Exhausted(reason)) => {
                dir.remove();
                ReportKind::NotStarted(reason)
            }
            Err(StartError::Failed(error)) => {
                dir.remove();
                let log = TaskLog::shared(
                    log_path(&self.config.logs_dir, launch.id),
                    launch.attempt,
                    self.config.max_log_bytes,
                );
                let line = format!("orch: could not start the task's supervisor: {error}\n");
                lock(&log).write(line.as_bytes());
                ReportKind::Exited(AttemptOutcome::SpawnFailed { error })
            }
        }
    }

    /// Writes the launch file, starts the supervisor, waits until its socket listens and
    /// connects to it (no connection when it has ended already).
    async fn start_supervisor(
        &self,
        dir: &AttemptDir,
        launch: &Launch,
    ) -> Result<(Option<UnixStream>, Child), StartError> {
        let file = LaunchFile {
            config: (*self.config).clone(),
            id: launch.id,
            attempt: launch.attempt,
            spec: launch.spec.clone(),
        };
        let what = dir.path().display().to_string();
        dir.create(&file).map_err(|e| StartError::of(&what, &e))?;
        let lock = dir.lock().map_err(|e| StartError::of(&what, &e))?;
        let exe = &self.config.binary;
        let mut command = tokio::process::Command::new(exe);
        command
            .arg("supervise")
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(self.supervisor_stderr())
            .process_group(0)
            .kill_on_drop(false);
        crate::files::restore_umask(&mut command);
        pass_lock(&mut command, &lock);
        let mut child = command
            .spawn()
            .map_err(|e| StartError::of(&exe.display().to_string(), &e))?;
        drop(lock); // the supervisor holds it now
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line).await;
        if line.trim() != attempt_dir::READY {
            let status = child.wait().await;
            let why = format!("the supervisor did not start ({status:?}; see supervisors.log)");
            return Err(StartError::Failed(why));
        }
        // A quick attempt may be over (and its supervisor gone) before this connects: its
        // outcome is in its directory all the same.
        let stream = UnixStream::connect(dir.socket()).await.ok();
        Ok((stream, child))
    }

    /// Where supervisors write what goes wrong with them: `supervisors.log` in the data
    /// directory (never the daemon's own standard error, which may be a pipe that closes).
    fn supervisor_stderr(&self) -> Stdio {
        let path = self.config.data_dir.join("supervisors.log");
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            Ok(file) => Stdio::from(file),
            Err(_) => Stdio::null(),
        }
    }

    /// Follows a supervisor until the attempt ends (or the supervisor is gone), passing
    /// its progress on and a cancel to it; then the outcome it recorded. A supervisor gone
    /// without an outcome leaves an interrupted attempt (whatever it left running is
    /// stopped first).
    async fn follow(
        &self,
        dir: AttemptDir,
        stream: Option<UnixStream>,
        token: CancellationToken,
        reporter: Reporter,
        child: Option<Child>,
    ) -> ReportKind {
        if let Some(stream) = stream {
            exchange(stream, &token, &reporter).await;
        }
        if let Some(mut child) = child {
            let _ = child.wait().await;
        }
        match dir.read_outcome() {
            Some(ended) => ended.report(),
            None => {
                let task = HashSet::from([reporter.id]);
                crate::orphans::kill_leftovers(&self.config.data_dir, &task);
                tracing::warn!(
                    task = reporter.id,
                    attempt = reporter.attempt,
                    "the attempt's supervisor is gone without an outcome"
                );
                ReportKind::Exited(AttemptOutcome::Interrupted)
            }
        }
    }

    /// Takes over the attempts a previous daemon left `running` (in the store's order):
    /// an outcome recorded meanwhile is reported now, in that order; a live supervisor is
    /// followed again; an attempt never launched is reported as not started. Those are
    /// returned; the others (a supervisor gone without an outcome) are interrupted.
    /// Supervisors of attempts not in `running` are told to discard theirs.
    pub fn take_over(
        &self,
        runtime: &tokio::runtime::Handle,
        running: &[(TaskId, u32)],
    ) -> Vec<Adopted> {
        let mut adopted = Vec::new();
        for &(id, attempt) in running {
            let dir = AttemptDir::of(&self.config.data_dir, id, attempt);
            let reporter = Reporter {
                reports: self.reports.clone(),
                id,
                attempt,
            };
            let token = CancellationToken::new();
            match connect(&dir) {
                Some(stream) => {
                    tracing::info!(task = id, attempt, "re-attached to a running attempt");
                    let (runner, token) = (self.clone(), token.clone());
                    runtime.spawn(async move {
                        let kind = runner
                            .follow(dir, Some(stream), token, reporter.clone(), None)
                            .await;
                        reporter.send(kind);
                    });
                }
                None => match dir.read_outcome() {
                    Some(ended) => {
                        tracing::info!(task = id, attempt, outcome = ?ended.outcome, at_ms = ended.at_ms, "collected an attempt that ended while the daemon was down");
                        reporter.send(ended.report());
                    }
                    // The daemon made the directory but died before its supervisor came up
                    // (no directory: a daemon without supervisors ran it, or died even
                    // earlier; it is interrupted, as before).
                    None if dir.path().exists() && !dir.socket().exists() => {
                        dir.remove();
                        tracing::info!(
                            task = id,
                            attempt,
                            "an attempt the previous daemon did not launch is tried again"
                        );
                        let reason = "the daemon stopped before starting it".to_string();
                        reporter.send(ReportKind::NotStarted(reason));
                        adopted.push(Adopted {
                            id,
                            attempt,
                            token,
                            launched: false,
                        });
                        continue;
                    }
                    None => {
                        dir.remove();
                        continue;
                    }
                },
            }
            adopted.push(Adopted {
                id,
                attempt,
                token,
                launched: true,
            });
        }
        self.discard_strays(running);
        adopted
    }

    /// Tells the supervisors of attempts not in `running` to stop theirs and leave no
    /// outcome; removes the directories of such attempts that have none.
    fn discard_strays(&self, running: &[(TaskId, u32)]) {
        let known: HashSet<(TaskId, u32)> = running.iter().copied().collect();
        let Ok(entries) = std::fs::read_dir(attempt_dir::attempts_dir(&self.config.data_dir))
        else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let parsed = AttemptDir::parse(&name.to_string_lossy());
            if parsed.is_some_and(|k| known.contains(&k)) {
                continue;
            }
            let dir = AttemptDir::at(&entry.path());
            match std::os::unix::net::UnixStream::connect(dir.socket()) {
                Ok(mut stream) => {
                    use std::io::Write as _;
                    tracing::warn!(dir = %dir.path().display(), "stopping the supervisor of an attempt the store does not know");
                    let _ = writeln!(stream, "{}", attempt_dir::DISCARD);
                }
                Err(_) => dir.remove(),
            }
        }
    }

    /// Removes the directory of a supervised attempt whose outcome is committed.
    pub fn release(&self, id: TaskId, attempt: u32) {
        if self.config.supervise {
            AttemptDir::of(&self.config.data_dir, id, attempt).remove();
        }
    }
}

/// How long a start waits for a supervisor that holds its lock but does not accept yet
/// (one the previous daemon started an instant before it died).
const STARTING_SUPERVISOR_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The supervisor's lock, inherited as descriptor 3 (see [`super::attempt_dir`]).
fn pass_lock(command: &mut tokio::process::Command, lock: &std::fs::File) {
    use std::os::fd::AsRawFd as _;
    let fd = lock.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and only calls dup2(2),
    // which is async-signal-safe; the new descriptor 3 does not close on exec.
    unsafe {
        command.pre_exec(move || {
            if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Connects to the supervisor of `dir`: at once if it listens; if it holds its lock but
/// does not listen yet, once it does (for a while).
fn connect(dir: &AttemptDir) -> Option<UnixStream> {
    let deadline = std::time::Instant::now() + STARTING_SUPERVISOR_WAIT;
    let stream = loop {
        match std::os::unix::net::UnixStream::connect(dir.socket()) {
            Ok(stream) => break stream,
            Err(_) if dir.is_locked() && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(_) => return None,
        }
    };
    stream.set_nonblocking(true).ok()?;
    UnixStream::from_std(stream).ok()
}

/// Passes the supervisor's progress lines on until it says the attempt ended or the
/// connection closes; sends it a cancel once `token` is cancelled.
async fn exchange(stream: UnixStream, token: &CancellationToken, reporter: &Reporter) {
    let (reader, mut writer) = stream.into_split();
    let mut lines = BufReader::new(reader).lines();
    let mut cancel_sent = false;
    loop {
        tokio::select! {
            line = lines.next_line() => match line {
                Ok(Some(line)) => match serde_json::from_str::<Message>(&line) {
                    Ok(Message::Progress(p)) => reporter.send(ReportKind::Progress(p)),
                    Ok(Message::Ended) => return,
                    Err(_) => {}
                },
                _ => return,
            },
            () = token.cancelled(), if !cancel_sent => {
                cancel_sent = true;
                let line = format!("{}\n", attempt_dir::CANCEL);
                let _ = writer.write_all(line.as_bytes()).await;
            }
        }
    }
}
