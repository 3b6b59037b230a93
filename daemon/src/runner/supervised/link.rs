//! The daemon's connection to the supervisor: opened (and the supervisor started) when
//! there is none, one task writing the messages sent on it and one reading the
//! supervisor's; when it closes, the attempts followed on it are interrupted.

use std::collections::HashSet;
use std::process::Stdio;
use std::time::Duration;

use orch_protocol::{AttemptOutcome, TaskId};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, BufWriter};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;

use super::super::wire::{self, AttemptKey, FromSupervisor, Hello, SupervisorDir, ToSupervisor};
use super::super::{ReportKind, Runner, StartError};
use super::Follower;

/// How long the daemon waits for a supervisor to come up and greet it.
const START_WAIT: Duration = Duration::from_secs(10);

/// Where messages to the supervisor go (as lines, serialized by the sender).
#[derive(Clone)]
pub(super) struct Link {
    pub(super) to: mpsc::UnboundedSender<Vec<u8>>,
    pub(super) generation: u64,
}

impl Link {
    /// Sends `message` (a closed connection is noticed by its reader).
    pub(super) fn send(&self, message: &ToSupervisor) {
        if let Ok(line) = line_of(message) {
            let _ = self.to.send(line);
        }
    }
}

/// Sends each later deadline of `deadlines` on `link` as a fence, until the connection
/// closes.
async fn forward_fence(
    mut deadlines: tokio::sync::watch::Receiver<Option<tokio::time::Instant>>,
    link: Link,
) {
    while deadlines.changed().await.is_ok() {
        if !send_fence(&link, *deadlines.borrow_and_update()) {
            return;
        }
    }
}

/// Sends `deadline` (if any) on `link` as a fence; false once the connection is closed.
fn send_fence(link: &Link, deadline: Option<tokio::time::Instant>) -> bool {
    let Some(deadline) = deadline else {
        return true;
    };
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    let left_ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
    let until_monotonic_ms = wire::monotonic_ms().saturating_add(left_ms);
    match line_of(&ToSupervisor::Fence { until_monotonic_ms }) {
        Ok(line) => link.to.send(line).is_ok(),
        Err(_) => false,
    }
}

/// `message` as one line.
pub(super) fn line_of(message: &ToSupervisor) -> Result<Vec<u8>, serde_json::Error> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    Ok(line)
}

impl Runner {
    /// The open connection to the supervisor; opened (and the supervisor started) when
    /// there is none.
    pub(super) async fn link(&self) -> Result<Link, StartError> {
        if let Some(link) = self.supervision.state().link.clone() {
            return Ok(link);
        }
        let _opening = self.supervision.opening.lock().await;
        if let Some(link) = self.supervision.state().link.clone() {
            return Ok(link);
        }
        let (reader, writer, hello) = self.open().await?;
        self.check_protocol(&hello)
            .map_err(|e| StartError::Failed(e.to_string()))?;
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
    pub(super) fn install(&self, writer: OwnedWriteHalf) -> Link {
        let (to, from_daemon) = mpsc::unbounded_channel();
        let mut state = self.supervision.state();
        state.generation += 1;
        let link = Link {
            to,
            generation: state.generation,
        };
        state.link = Some(link.clone());
        let fence = state.fence.clone();
        drop(state);
        tokio::spawn(write_messages(from_daemon, writer));
        if let Some(mut deadlines) = fence {
            // Before anything else is sent on it: a new connection starts unfenced.
            send_fence(&link, *deadlines.borrow_and_update());
            tokio::spawn(forward_fence(deadlines, link.clone()));
        }
        link
    }

    /// Starts reading the supervisor's messages on `link`.
    pub(super) fn read(&self, reader: BufReader<OwnedReadHalf>, link: &Link) {
        let runner = self.clone();
        let generation = link.generation;
        tokio::spawn(async move { runner.read_messages(reader, generation).await });
    }

    /// Connects to the supervisor (starting one when none lives) and reads its hello.
    pub(super) async fn open(
        &self,
    ) -> Result<(BufReader<OwnedReadHalf>, OwnedWriteHalf, Hello), StartError> {
        let dir = SupervisorDir::of(&self.config.data_dir);
        let deadline = tokio::time::Instant::now() + START_WAIT;
        let what = dir.socket().display().to_string();
        loop {
            match UnixStream::connect(dir.socket()).await {
                Ok(stream) if !wire::same_user(&stream) => {
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
        crate::child::restore(&mut command);
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
