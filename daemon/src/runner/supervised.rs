//! The daemon's side of supervision: one connection to the supervisor of its data
//! directory (see [`super::supervisor`]), started when none lives. Each launch is a
//! message on it; progress lines and outcomes come back on it and go to the engine as
//! reports. At start the daemon takes over what the supervisor holds: outcomes of
//! attempts that ended while no daemon was there, attempts still running (followed
//! again), and attempts the store does not know (stopped).
//!
//! A supervisor that goes away (killed) leaves the attempts it ran interrupted: their
//! leftovers are stopped, and the next launch starts a new supervisor.

use std::collections::{HashMap, HashSet};
use std::process::Stdio;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use orch_protocol::{AttemptOutcome, TaskId};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, BufWriter};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::log::{TaskLog, lock};
use super::wire::{self, AttemptKey, FromSupervisor, Hello, SupervisorDir, ToSupervisor};
use super::{Launch, ReportKind, Reporter, Runner, StartError, log_path};

/// How long the daemon waits for a supervisor to come up and greet it.
const START_WAIT: Duration = Duration::from_secs(10);

/// An attempt left running (or ended) under the supervisor, which this daemon now
/// follows.
pub struct Adopted {
    /// The task.
    pub id: TaskId,
    /// Which attempt.
    pub attempt: u32,
    /// Cancelled to stop it.
    pub token: CancellationToken,
    /// False for an attempt the previous daemon recorded as running but died before
    /// handing to the supervisor (which lived all along and never heard of it): it is
    /// reported as not started, and is tried again without using an attempt; the
    /// processes a daemon without supervisors may have left for it must be stopped
    /// first.
    pub launched: bool,
}

/// Why the supervisor's attempts cannot be taken over.
#[derive(Debug, thiserror::Error)]
#[error(
    "the supervisor of {dir} speaks version {found} of the supervisor protocol, this daemon {ours}: let its attempts finish (or stop it) and start this daemon again"
)]
pub struct TakeOverError {
    /// The supervisor's directory.
    dir: String,
    /// The version it speaks.
    found: u32,
    /// The version this daemon speaks.
    ours: u32,
}

/// The daemon's connection to its supervisor, shared by the runner's clones.
#[derive(Default)]
pub(super) struct Supervision {
    state: Mutex<Linked>,
    /// Held while a connection is being opened (one at a time).
    opening: tokio::sync::Mutex<()>,
}

/// The open connection, if any, and the attempts followed on it.
#[derive(Default)]
struct Linked {
    link: Option<Link>,
    /// Numbers the connections, so that a closed one only interrupts its own attempts.
    generation: u64,
    followers: HashMap<AttemptKey, Follower>,
}

/// Where messages to the supervisor go (as lines, serialized by the sender).
#[derive(Clone)]
struct Link {
    to: mpsc::UnboundedSender<Vec<u8>>,
    generation: u64,
}

impl Link {
    /// Sends `message` (a closed connection is noticed by its reader).
    fn send(&self, message: &ToSupervisor) {
        if let Ok(line) = line_of(message) {
            let _ = self.to.send(line);
        }
    }
}

/// `message` as one line.
fn line_of(message: &ToSupervisor) -> Result<Vec<u8>, serde_json::Error> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    Ok(line)
}

/// An attempt the daemon waits on.
struct Follower {
    reporter: Reporter,
    generation: u64,
    /// Sends the cancel once the attempt's token is cancelled.
    watcher: tokio::task::AbortHandle,
}

impl Supervision {
    fn state(&self) -> MutexGuard<'_, Linked> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Runner {
    /// Hands the attempt to the supervisor (started when none lives); its outcome comes
    /// back as a report.
    pub(super) async fn launch_supervised(&self, launch: Launch) {
        let reporter = self.reporter(&launch);
        if launch.token.is_cancelled() {
            return reporter.send(ReportKind::Exited(AttemptOutcome::Cancelled));
        }
        let key = (launch.id, launch.attempt);
        let link = match self.link().await {
            Ok(link) => link,
            Err(StartError::Exhausted(reason)) => {
                return reporter.send(ReportKind::NotStarted(reason));
            }
            Err(StartError::Failed(error)) => {
                let log = TaskLog::shared(
                    log_path(&self.config.logs_dir, launch.id),
                    launch.attempt,
                    self.config.max_log_bytes,
                );
                let line = format!("orch: could not start the supervisor: {error}\n");
                lock(&log).write(line.as_bytes());
                return reporter.send(ReportKind::Exited(AttemptOutcome::SpawnFailed { error }));
            }
        };
        let message = ToSupervisor::Launch {
            id: launch.id,
            attempt: launch.attempt,
            spec: Box::new(launch.spec),
            config: Box::new((*self.config).clone()),
        };
        let line = match line_of(&message) {
            Ok(line) => line,
            Err(e) => {
                // Such as a path that is not UTF-8 in the settings.
                let error = format!("the launch cannot be written for the supervisor: {e}");
                return reporter.send(ReportKind::Exited(AttemptOutcome::SpawnFailed { error }));
            }
        };
        let mut state = self.supervision.state();
        if state.link.as_ref().map(|l| l.generation) != Some(link.generation) {
            // The connection closed meanwhile: the attempt never reached a supervisor.
            drop(state);
            let reason = "the supervisor went away before the attempt started".to_string();
            return reporter.send(ReportKind::NotStarted(reason));
        }
        let follower = self.follower(&link, key, reporter, launch.token);
        state.followers.insert(key, follower);
        let _ = link.to.send(line);
    }

    /// A follower of attempt `key` on `link`, whose cancel goes to the supervisor once
    /// `token` is cancelled.
    fn follower(
        &self,
        link: &Link,
        key: AttemptKey,
        reporter: Reporter,
        token: CancellationToken,
    ) -> Follower {
        let to = link.to.clone();
        let watcher = tokio::spawn(async move {
            token.cancelled().await;
            let (id, attempt) = key;
            if let Ok(line) = line_of(&ToSupervisor::Cancel { id, attempt }) {
                let _ = to.send(line);
            }
        });
        Follower {
            reporter,
            generation: link.generation,
            watcher: watcher.abort_handle(),
        }
    }

    /// The open connection to the supervisor; opened (and the supervisor started) when
    /// there is none.
    async fn link(&self) -> Result<Link, StartError> {
        if let Some(link) = self.supervision.state().link.clone() {
            return Ok(link);
        }
        let _opening = self.supervision.opening.lock().await;
        if let Some(link) = self.supervision.state().link.clone() {
            return Ok(link);
        }
        let (reader, writer, hello) = self.open().await?;
        if hello.protocol != wire::PROTOCOL {
            let why = format!(
                "the supervisor speaks version {} of its protocol, this daemon {}",
                hello.protocol,
                wire::PROTOCOL
            );
            return Err(StartError::Failed(why));
        }
        // This daemon's earlier supervisor died (its attempts were reported interrupted):
        // this one is new. What it runs is from before; the outcomes it loaded from the
        // journal are left to the next take-over, which releases them once the store
        // says they are not needed.
        let link = self.install(writer);
        for (id, attempt) in hello.running {
            link.send(&ToSupervisor::Discard { id, attempt });
        }
        self.read(reader, &link);
        Ok(link)
    }

    /// Makes the connection current: a task writes the messages sent to it. Its reader
    /// is started with [`Runner::read`], once the attempts already on it are followed.
    fn install(&self, writer: OwnedWriteHalf) -> Link {
        let (to, from_daemon) = mpsc::unbounded_channel();
        let mut state = self.supervision.state();
        state.generation += 1;
        let link = Link {
            to,
            generation: state.generation,
        };
        state.link = Some(link.clone());
        drop(state);
        tokio::spawn(write_messages(from_daemon, writer));
        link
    }

    /// Starts reading the supervisor's messages on `link`.
    fn read(&self, reader: BufReader<OwnedReadHalf>, link: &Link) {
        let runner = self.clone();
        let generation = link.generation;
        tokio::spawn(async move { runner.read_messages(reader, generation).await });
    }

    /// Connects to the supervisor (starting one when none lives) and reads its hello.
    async fn open(&self) -> Result<(BufReader<OwnedReadHalf>, OwnedWriteHalf, Hello), StartError> {
        let dir = SupervisorDir::of(&self.config.data_dir);
        let deadline = tokio::time::Instant::now() + START_WAIT;
        let what = dir.socket().display().to_string();
        loop {
            match UnixStream::connect(dir.socket()).await {
                Ok(stream) if !same_user(&stream) => {
                    let error = std::io::Error::other("the socket belongs to another user");
                    return Err(StartError::of(&what, &error));
                }
                Ok(stream) => {
                    let (reader, writer) = stream.into_split();
                    let mut reader = BufReader::new(reader);
                    if let Some(hello) = read_hello(&mut reader, deadline).await {
                        return Ok((reader, writer, hello));
                    }
                    // A supervisor that was exiting as this connected: the next is started.
                }
                Err(_) if dir.is_locked() => {}
                Err(_) => self.start_supervisor().await?,
            }
            if tokio::time::Instant::now() >= deadline {
                let error = std::io::Error::other("the supervisor does not answer");
                return Err(StartError::of(&what, &error));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Starts the supervisor and waits until its socket listens (or it says another one
    /// serves the data directory).
    async fn start_supervisor(&self) -> Result<(), StartError> {
        let exe = &self.config.binary;
        let mut command = tokio::process::Command::new(exe);
        command
            .arg("supervise")
            .arg(&self.config.data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(self.supervisor_stderr())
            .process_group(0)
            .kill_on_drop(false);
        crate::files::restore_umask(&mut command);
        let mut child = command
            .spawn()
            .map_err(|e| StartError::of(&exe.display().to_string(), &e))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        let mut stdout = BufReader::new(stdout);
        let wait = stdout.read_line(&mut line);
        let _ = tokio::time::timeout(START_WAIT, wait).await;
        let said = line.trim().to_string();
        // Reaped whenever it exits (it outlives this daemon when need be).
        tokio::spawn(async move { child.wait().await });
        if said != wire::READY && said != wire::BUSY {
            let why = "the supervisor did not start (see supervisors.log in the data dir)";
            return Err(StartError::Failed(why.to_string()));
        }
        tracing::info!("started the supervisor of the running attempts");
        Ok(())
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

    /// Reads the supervisor's messages on connection `generation` until it closes; then
    /// the attempts followed on it that did not end are interrupted.
    async fn read_messages(&self, reader: BufReader<OwnedReadHalf>, generation: u64) {
        let mut lines = reader.lines();
        while let Ok(Some(line)) = lines.next_line().await {
            match serde_json::from_str::<FromSupervisor>(&line) {
                Ok(FromSupervisor::Progress {
                    id,
                    attempt,
                    progress,
                }) => {
                    let state = self.supervision.state();
                    if let Some(follower) = state.followers.get(&(id, attempt)) {
                        follower.reporter.send(ReportKind::Progress(progress));
                    }
                }
                Ok(FromSupervisor::Ended(ended)) => {
                    let follower = self.supervision.state().followers.remove(&ended.key());
                    match follower {
                        Some(follower) => {
                            follower.watcher.abort();
                            follower.reporter.send(ended.report());
                        }
                        None => self.release(ended.id, ended.attempt),
                    }
                }
                Ok(FromSupervisor::Hello(_)) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "a message from the supervisor not understood")
                }
            }
        }
        self.lost(generation).await;
    }

    /// Connection `generation` closed: its attempts are interrupted (whatever they left
    /// running is stopped first), and the next launch opens a new one.
    async fn lost(&self, generation: u64) {
        let lost: Vec<(AttemptKey, Follower)> = {
            let mut state = self.supervision.state();
            if state
                .link
                .as_ref()
                .is_some_and(|l| l.generation == generation)
            {
                state.link = None;
            }
            let keys: Vec<AttemptKey> = state
                .followers
                .iter()
                .filter(|(_, f)| f.generation == generation)
                .map(|(k, _)| *k)
                .collect();
            keys.into_iter()
                .filter_map(|k| state.followers.remove(&k).map(|f| (k, f)))
                .collect()
        };
        if lost.is_empty() {
            return;
        }
        tracing::warn!(
            attempts = lost.len(),
            "the supervisor is gone: its attempts are interrupted"
        );
        let tasks: HashSet<TaskId> = lost.iter().map(|((id, _), _)| *id).collect();
        let data_dir = self.config.data_dir.clone();
        let _ =
            tokio::task::spawn_blocking(move || crate::orphans::kill_leftovers(&data_dir, &tasks))
                .await;
        for (_, follower) in lost {
            follower.watcher.abort();
            follower
                .reporter
                .send(ReportKind::Exited(AttemptOutcome::Interrupted));
        }
    }

    /// Takes over what the supervisor holds (starting one when none lives), for the
    /// attempts a previous daemon left `running` (in the store's order): an outcome
    /// recorded meanwhile is reported now, in that order; a running attempt is followed
    /// again; an attempt the (living) supervisor never heard of is reported as not
    /// started. Those are returned; the others (their supervisor died) are interrupted.
    /// Attempts the store does not know are discarded.
    pub async fn take_over(
        &self,
        running: &[(TaskId, u32)],
    ) -> Result<Vec<Adopted>, TakeOverError> {
        if !self.config.supervise {
            return Ok(Vec::new());
        }
        let _opening = self.supervision.opening.lock().await;
        let (reader, writer, hello) = match self.open().await {
            Ok(opened) => opened,
            Err(StartError::Exhausted(why) | StartError::Failed(why)) => {
                tracing::error!(%why, "cannot reach the supervisor: running attempts are interrupted");
                return Ok(Vec::new());
            }
        };
        if hello.protocol != wire::PROTOCOL {
            let dir = SupervisorDir::of(&self.config.data_dir);
            return Err(TakeOverError {
                dir: dir.path().display().to_string(),
                found: hello.protocol,
                ours: wire::PROTOCOL,
            });
        }
        let link = self.install(writer);
        let mut ended: HashMap<AttemptKey, _> =
            hello.ended.into_iter().map(|e| (e.key(), e)).collect();
        let mut alive: HashSet<AttemptKey> = hello.running.into_iter().collect();
        let mut adopted = Vec::new();
        for &key in running {
            let (id, attempt) = key;
            let reporter = Reporter {
                reports: self.reports.clone(),
                id,
                attempt,
            };
            let token = CancellationToken::new();
            let launched = if let Some(ended) = ended.remove(&key) {
                tracing::info!(task = id, attempt, outcome = ?ended.outcome, at_ms = ended.at_ms, "collected an attempt that ended while the daemon was down");
                reporter.send(ended.report());
                true
            } else if alive.remove(&key) {
                tracing::info!(task = id, attempt, "re-attached to a running attempt");
                let follower = self.follower(&link, key, reporter, token.clone());
                self.supervision.state().followers.insert(key, follower);
                true
            } else if !hello.fresh {
                tracing::info!(
                    task = id,
                    attempt,
                    "an attempt the previous daemon did not launch is tried again"
                );
                let reason = "the daemon stopped before starting it".to_string();
                reporter.send(ReportKind::NotStarted(reason));
                false
            } else {
                continue;
            };
            adopted.push(Adopted {
                id,
                attempt,
                token,
                launched,
            });
        }
        for (id, attempt) in alive {
            tracing::warn!(
                task = id,
                attempt,
                "stopping an attempt the store does not know"
            );
            link.send(&ToSupervisor::Discard { id, attempt });
        }
        for (id, attempt) in ended.into_keys() {
            link.send(&ToSupervisor::Release { id, attempt });
        }
        // Only now: an attempt followed again may end at once.
        self.read(reader, &link);
        Ok(adopted)
    }

    /// Tells the supervisor that the outcome of a supervised attempt is committed.
    pub fn release(&self, id: TaskId, attempt: u32) {
        if !self.config.supervise {
            return;
        }
        if let Some(link) = &self.supervision.state().link {
            link.send(&ToSupervisor::Release { id, attempt });
        }
    }
}

/// Reads the supervisor's hello (`None` when the connection closes first, or nothing
/// comes before `deadline`).
async fn read_hello(
    reader: &mut BufReader<OwnedReadHalf>,
    deadline: tokio::time::Instant,
) -> Option<Hello> {
    let mut line = String::new();
    let read = tokio::time::timeout_at(deadline, reader.read_line(&mut line)).await;
    match read {
        Ok(Ok(n)) if n > 0 => match serde_json::from_str(&line) {
            Ok(FromSupervisor::Hello(hello)) => Some(hello),
            _ => None,
        },
        _ => None,
    }
}

/// True when the peer of `stream` runs as this process's user.
fn same_user(stream: &UnixStream) -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    let me = unsafe { libc::geteuid() };
    stream.peer_cred().is_ok_and(|c| c.uid() == me)
}

/// Writes the lines sent to the supervisor, as many as are waiting in one write.
async fn write_messages(mut lines: mpsc::UnboundedReceiver<Vec<u8>>, writer: OwnedWriteHalf) {
    let mut writer = BufWriter::new(writer);
    while let Some(line) = lines.recv().await {
        let mut next = Some(line);
        while let Some(line) = next {
            if writer.write_all(&line).await.is_err() {
                return;
            }
            next = lines.try_recv().ok();
        }
        if writer.flush().await.is_err() {
            return;
        }
    }
}
