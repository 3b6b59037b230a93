//! The supervisor: the daemon binary started as `provisioning-orchestrator supervise DATA`
//! by the daemon of that data directory, in its own process group, so that the attempts
//! it runs outlive the daemon (a crash, a restart, an upgrade). One supervisor serves
//! every attempt of its data directory (as a containerd shim serves a pod's containers):
//! an attempt costs one process, its own, not two.
//!
//! It runs each attempt with the runner's own code (process group, task log, progress
//! lines, timeout, TERM then KILL on cancel), is the parent of each attempt's process (so
//! it collects every exit status), forwards progress lines and outcomes to the connected
//! daemon, and keeps each outcome until that daemon says it is committed (`release`).
//! Outcomes no daemon has committed are written durably to its journal whenever no
//! daemon is connected (see [`super::wire`]), so that they outlive the supervisor too.
//!
//! It stops every attempt (leaving no outcome) when its data directory disappears; with a
//! grace period it also stops them (a cancel) once no daemon has been connected for that
//! long. With no daemon connected and nothing running, it exits after a short while.
//! A supervisor killed outright leaves interrupted attempts: the daemon sees its
//! connection close and stops what they left running by their markers (see
//! [`crate::orphans`]); a daemon that starts after both died does the same.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixListener;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::wire::{
    self, AttemptKey, EndedAttempt, FromSupervisor, Hello, SupervisorDir, ToSupervisor,
};
use super::{Launch, Report, ReportKind, Runner};

/// How often the supervisor checks that its data directory exists and its daemon is near.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// How long a supervisor with nothing to run and no daemon waits before it exits.
const IDLE_EXIT: Duration = Duration::from_secs(2);

/// Why a supervisor could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum SuperviseError {
    /// A file or the socket could not be used.
    #[error("{what}: {source}")]
    Io {
        /// What failed.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
}

/// Runs the supervisor of the data directory `data_dir` to its end; the process's exit
/// code.
pub fn main(data_dir: &Path) -> std::process::ExitCode {
    // The umask stays the one the daemon gave back (the user's), for the tasks: what the
    // supervisor itself creates is made private by mode. With no closure to run between
    // fork and exec, the standard library starts each task with posix_spawn (a vfork),
    // not a fork that copies the supervisor's page tables.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let result = match runtime {
        Ok(runtime) => runtime.block_on(supervise(data_dir)),
        Err(source) => Err(SuperviseError::Io {
            what: "cannot start the runtime",
            source,
        }),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "supervisor of {}: {e}",
                data_dir.display()
            );
            std::process::ExitCode::FAILURE
        }
    }
}

/// What the daemon's connections tell the supervisor.
enum FromDaemon {
    /// A message of connection number `.0`.
    Says(u64, ToSupervisor),
    /// Connection number `.0` asked for a launch that could not be read (a daemon of
    /// another build): it fails, with the reason.
    Unreadable(u64, AttemptKey, String),
    /// Connection number `.0` closed.
    Gone(u64),
}

/// An attempt the supervisor holds.
enum Held {
    /// Running; cancelled to stop it; `discard` once it is to leave no outcome.
    Running {
        token: CancellationToken,
        discard: bool,
    },
    /// Ended, its outcome not yet released.
    Ended(EndedAttempt),
}

/// The connection to the daemon, if one is open.
#[derive(Default)]
struct Link {
    writer: Option<OwnedWriteHalf>,
    /// The number of the latest connection.
    number: u64,
}

impl Link {
    /// Sends `message` to the connected daemon, if any (a failed write drops the link).
    async fn send(&mut self, message: &FromSupervisor) {
        let Some(writer) = &mut self.writer else {
            return;
        };
        let mut line = serde_json::to_vec(message).expect("messages serialize");
        line.push(b'\n');
        if writer.write_all(&line).await.is_err() {
            self.writer = None;
        }
    }
}

/// The supervisor's state: what it holds, and who listens.
struct Supervisor {
    dir: SupervisorDir,
    held: HashMap<AttemptKey, Held>,
    link: Link,
    /// Since when no daemon has been connected (`None`: one is).
    alone_since: Option<Instant>,
    /// Whether a daemon ever connected.
    greeted: bool,
    /// The attempts whose outcomes the journal on disk holds.
    journaled: HashSet<AttemptKey>,
    /// Whether the last write of the journal failed (the supervisor then does not exit
    /// while it holds outcomes).
    journal_failed: bool,
    /// How long attempts may run with no daemon connected (the latest launch's setting).
    grace: Option<Duration>,
    /// Whether the grace period ran out (the running attempts were cancelled).
    grace_spent: bool,
    /// Whether the data directory is gone (every attempt is being discarded).
    orphaned: bool,
    /// Attempts ending: their key and how.
    ended_tx: mpsc::UnboundedSender<(AttemptKey, ReportKind)>,
    /// Progress lines of running attempts.
    reports_tx: mpsc::UnboundedSender<Report>,
}

async fn supervise(data_dir: &Path) -> Result<(), SuperviseError> {
    let io = |what| move |source| SuperviseError::Io { what, source };
    let dir = SupervisorDir::of(data_dir);
    let Some(_lock) = dir
        .lock()
        .map_err(io("cannot lock the supervisor's directory"))?
    else {
        // Another supervisor serves this data directory: the daemon connects to it.
        let _ = announce(wire::BUSY);
        return Ok(());
    };
    let _ = std::fs::remove_file(dir.socket());
    let listener = UnixListener::bind(dir.socket()).map_err(io("cannot bind the socket"))?;
    // Its directory is private already; the socket is too (it is made with the user's
    // umask).
    std::fs::set_permissions(
        dir.socket(),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .map_err(io("cannot make the socket private"))?;
    // What a supervisor killed outright left of its attempts' scratch space goes: nothing
    // runs yet.
    let scratch = dir.path().join("attempts");
    if let Err(e) = std::fs::remove_dir_all(&scratch)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        let _ = writeln_stderr(&format!("cannot remove {}: {e}", scratch.display()));
    }
    crate::files::create_private_dir(&scratch)
        .map_err(io("cannot create the attempts' directory"))?;
    // A daemon that died before reading it is no reason to stop: the next one connects.
    let _ = announce(wire::READY);
    let (ended_tx, mut ended) = mpsc::unbounded_channel();
    let (reports_tx, mut reports) = mpsc::unbounded_channel();
    let journal = dir.read_journal();
    let mut state = Supervisor {
        journaled: journal.iter().map(EndedAttempt::key).collect(),
        journal_failed: false,
        held: journal
            .into_iter()
            .map(|e| (e.key(), Held::Ended(e)))
            .collect(),
        dir,
        link: Link::default(),
        alone_since: Some(Instant::now()),
        greeted: false,
        grace: None,
        grace_spent: false,
        orphaned: false,
        ended_tx,
        reports_tx,
    };
    let (from_daemon, mut commands) = mpsc::unbounded_channel();
    let mut check = tokio::time::interval(CHECK_EVERY);
    loop {
        tokio::select! {
            Ok((stream, _)) = listener.accept() => {
                // One daemon at a time: a second connection while one is open (another
                // client of the same user, or a new daemon before the old one's
                // connection closed) is refused; a new daemon tries again.
                if !same_user(&stream) || state.link.writer.is_some() {
                    continue;
                }
                let (reader, writer) = stream.into_split();
                state.connected(writer).await;
                tokio::spawn(listen(reader, state.link.number, from_daemon.clone()));
            }
            Some(report) = reports.recv() => state.progress(report).await,
            Some((key, kind)) = ended.recv() => state.ended(key, kind).await,
            Some(command) = commands.recv() => match command {
                FromDaemon::Says(n, message) if n == state.link.number => state.obey(message),
                FromDaemon::Unreadable(n, key, error) if n == state.link.number => {
                    let outcome = orch_protocol::AttemptOutcome::SpawnFailed { error };
                    state.ended(key, ReportKind::Exited(outcome)).await;
                }
                FromDaemon::Says(..) | FromDaemon::Unreadable(..) => {}
                FromDaemon::Gone(n) => state.gone(n),
            },
            _ = check.tick() => {
                if state.check(data_dir) {
                    break;
                }
            }
        }
    }
    let _ = std::fs::remove_file(state.dir.socket());
    Ok(())
}

impl Supervisor {
    /// A daemon connected (none was): it is told what is held.
    async fn connected(&mut self, writer: OwnedWriteHalf) {
        self.link.number += 1;
        self.link.writer = Some(writer);
        self.alone_since = None;
        self.grace_spent = false;
        let mut hello = Hello {
            protocol: wire::PROTOCOL,
            fresh: !self.greeted,
            running: Vec::new(),
            ended: Vec::new(),
        };
        for (key, held) in &self.held {
            match held {
                Held::Running { discard: false, .. } => hello.running.push(*key),
                Held::Running { .. } => {}
                Held::Ended(ended) => hello.ended.push(ended.clone()),
            }
        }
        hello.running.sort_unstable();
        self.greeted = true;
        self.link.send(&FromSupervisor::Hello(hello)).await;
    }

    /// Carries out a message of the connected daemon.
    fn obey(&mut self, message: ToSupervisor) {
        match message {
            ToSupervisor::Launch {
                id,
                attempt,
                spec,
                config,
            } => self.launch((id, attempt), *spec, *config),
            ToSupervisor::Cancel { id, attempt } => {
                if let Some(Held::Running { token, .. }) = self.held.get(&(id, attempt)) {
                    token.cancel();
                }
            }
            ToSupervisor::Discard { id, attempt } => {
                if let Some(Held::Running { token, discard }) = self.held.get_mut(&(id, attempt)) {
                    *discard = true;
                    token.cancel();
                }
            }
            ToSupervisor::Release { id, attempt } => {
                if let Some(Held::Ended(_)) = self.held.get(&(id, attempt)) {
                    self.held.remove(&(id, attempt));
                    if self.journaled.contains(&(id, attempt)) {
                        // Only what the journal held: outcomes the connected daemon got
                        // are not journaled.
                        let kept = std::mem::take(&mut self.journaled);
                        self.write_journal(|key| kept.contains(key));
                    }
                }
            }
        }
    }

    /// Starts attempt `key` (unless it runs already; a new launch replaces an outcome
    /// left from an earlier start of the same attempt).
    fn launch(
        &mut self,
        key: AttemptKey,
        spec: orch_protocol::TaskSpec,
        config: super::RunnerConfig,
    ) {
        if matches!(self.held.get(&key), Some(Held::Running { .. })) {
            return;
        }
        self.grace = config.supervisor_grace;
        let token = CancellationToken::new();
        if self.orphaned || self.grace_spent {
            token.cancel();
        }
        self.held.insert(
            key,
            Held::Running {
                token: token.clone(),
                discard: self.orphaned,
            },
        );
        let runner =
            Runner::in_supervisor(config, self.dir.clone()).with_reports(self.reports_tx.clone());
        let launch = Launch {
            id: key.0,
            attempt: key.1,
            spec,
            token,
        };
        let ended = self.ended_tx.clone();
        tokio::spawn(async move {
            let kind = runner.run_here(launch).await;
            let _ = ended.send((key, kind));
        });
    }

    /// Passes a progress line on to the connected daemon.
    async fn progress(&mut self, report: Report) {
        if let ReportKind::Progress(progress) = report.kind {
            let (id, attempt) = (report.id, report.attempt);
            let message = FromSupervisor::Progress {
                id,
                attempt,
                progress,
            };
            self.link.send(&message).await;
        }
    }

    /// Attempt `key` ended as `kind`: its outcome is kept (and journaled when no daemon
    /// is connected) and sent; a discarded attempt is forgotten.
    async fn ended(&mut self, key: AttemptKey, kind: ReportKind) {
        let scratch = self.dir.scratch(key);
        if let Err(e) = std::fs::remove_dir_all(&scratch)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            let _ = writeln_stderr(&format!("cannot remove {}: {e}", scratch.display()));
        }
        let _ = std::fs::remove_file(self.dir.params_file(key));
        if let Some(Held::Running { discard: true, .. }) = self.held.get(&key) {
            self.held.remove(&key);
            return;
        }
        let Some(ended) = EndedAttempt::of(key, kind) else {
            return;
        };
        self.held.insert(key, Held::Ended(ended.clone()));
        self.link.send(&FromSupervisor::Ended(ended)).await;
        if self.link.writer.is_none() {
            self.save_journal();
        }
    }

    /// Connection number `n` closed: when it was the current one, the outcomes it did not
    /// release are journaled.
    fn gone(&mut self, n: u64) {
        if n == self.link.number {
            self.link.writer = None;
            self.alone_since.get_or_insert_with(Instant::now);
            self.save_journal();
        }
    }

    /// The periodic check; true when the supervisor is to exit.
    fn check(&mut self, data_dir: &Path) -> bool {
        let running = self
            .held
            .values()
            .filter(|h| matches!(h, Held::Running { .. }));
        let running = running.count();
        if !self.orphaned && !data_dir.exists() {
            self.orphaned = true;
            for held in self.held.values_mut() {
                if let Held::Running { token, discard } = held {
                    *discard = true;
                    token.cancel();
                }
            }
        }
        if self.orphaned {
            return running == 0;
        }
        let Some(since) = self.alone_since else {
            return false;
        };
        self.spend_grace();
        if self.journal_failed {
            // Outcomes that are nowhere else must not go with the process: try again.
            self.save_journal();
        }
        running == 0 && !self.journal_failed && since.elapsed() >= IDLE_EXIT
    }

    /// Cancels the running attempts once no daemon has been connected for the grace
    /// period (the latest launch's setting).
    fn spend_grace(&mut self) {
        let Some((grace, since)) = self.grace.zip(self.alone_since) else {
            return;
        };
        if self.grace_spent || since.elapsed() < grace {
            return;
        }
        self.grace_spent = true;
        for held in self.held.values() {
            if let Held::Running { token, .. } = held {
                token.cancel();
            }
        }
    }

    /// Writes every outcome not released to the journal, durably.
    fn save_journal(&mut self) {
        self.write_journal(|_| true);
    }

    /// Replaces the journal with the outcomes not released whose attempts `keep` accepts.
    fn write_journal(&mut self, keep: impl Fn(&AttemptKey) -> bool) {
        let ended: Vec<&EndedAttempt> = self
            .held
            .iter()
            .filter(|(key, _)| keep(key))
            .filter_map(|(_, h)| match h {
                Held::Ended(ended) => Some(ended),
                Held::Running { .. } => None,
            })
            .collect();
        match self.dir.write_journal(&ended) {
            Ok(()) => {
                self.journaled = ended.iter().map(|e| e.key()).collect();
                self.journal_failed = false;
            }
            Err(e) => {
                self.journal_failed = true;
                let _ = writeln_stderr(&format!("cannot write the journal of outcomes: {e}"));
            }
        }
    }
}

fn writeln_stderr(line: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    writeln!(std::io::stderr(), "{line}")
}

/// True when the peer of `stream` runs as this process's user (the directory is private
/// already; this holds even if its mode was changed).
fn same_user(stream: &tokio::net::UnixStream) -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    let me = unsafe { libc::geteuid() };
    stream.peer_cred().is_ok_and(|c| c.uid() == me)
}

/// Reads the messages of daemon connection number `n` until it closes.
async fn listen(
    reader: tokio::net::unix::OwnedReadHalf,
    n: u64,
    to: mpsc::UnboundedSender<FromDaemon>,
) {
    let mut lines = BufReader::new(reader).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        match serde_json::from_str::<ToSupervisor>(&line) {
            Ok(message) => {
                let _ = to.send(FromDaemon::Says(n, message));
            }
            Err(e) => {
                let error = format!("the supervisor cannot read the launch: {e}");
                match launch_key(&line) {
                    Some(key) => {
                        let _ = to.send(FromDaemon::Unreadable(n, key, error));
                    }
                    None => {
                        let _ = writeln_stderr(&format!("a message it does not understand: {e}"));
                    }
                }
            }
        }
    }
    let _ = to.send(FromDaemon::Gone(n));
}

/// The attempt a `launch` line names, when its fields are readable but the rest is not.
fn launch_key(line: &str) -> Option<AttemptKey> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    if value.get("do")?.as_str()? != "launch" {
        return None;
    }
    let id = value.get("id")?.as_u64()?;
    let attempt = u32::try_from(value.get("attempt")?.as_u64()?).ok()?;
    Some((id, attempt))
}

/// Tells the daemon that started it whether it serves (its socket listens) or another
/// one does, then lets go of its standard output (pointed at /dev/null), which is the
/// daemon's pipe.
fn announce(line: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::fd::AsRawFd as _;
    let mut out = std::io::stdout();
    let said = writeln!(out, "{line}").and_then(|()| out.flush());
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    // SAFETY: dup2(2) on two open descriptors; replacing fd 1 only redirects later writes.
    if unsafe { libc::dup2(null.as_raw_fd(), 1) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    said
}
