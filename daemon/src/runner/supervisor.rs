//! The supervisor: the daemon binary started as `provisioning-orchestrator supervise DIR`
//! for one attempt, in its own process group, so that the attempt outlives the daemon
//! (a crash, a restart, an upgrade).
//!
//! It runs the attempt with the runner's own code (process group, task log, progress
//! lines, timeout, TERM then KILL on cancel), listens on the attempt directory's socket
//! for the daemon (the one that started it, or the next one), forwards progress lines to
//! whichever daemon is connected, and records the outcome durably before it says so and
//! exits. It stops its task (leaving no outcome) when its data directory or its attempt
//! directory disappears, or when it is told to discard the attempt; with a grace period
//! it also stops it (a cancel) once no daemon has been connected for that long.

use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixListener;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::attempt_dir::{self, AttemptDir, Ended, Message};
use super::{Launch, ReportKind, Runner};

/// How often the supervisor checks that its directories exist and its daemon is near.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Why a supervisor could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum SuperviseError {
    /// The launch file is missing or unreadable.
    #[error("cannot read the launch file in {dir}: {source}")]
    Launch {
        /// The attempt directory.
        dir: String,
        /// Why.
        source: std::io::Error,
    },
    /// The socket could not be bound, or the outcome could not be written.
    #[error("{what}: {source}")]
    Io {
        /// What failed.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
}

/// Runs the supervisor of the attempt in `dir` to its end; the process's exit code.
pub fn main(dir: &std::path::Path) -> std::process::ExitCode {
    crate::files::set_private_umask();
    keep_lock_from_task();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let result = match runtime {
        Ok(runtime) => runtime.block_on(supervise(AttemptDir::at(dir))),
        Err(source) => Err(SuperviseError::Io {
            what: "cannot start the runtime",
            source,
        }),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "supervisor of {}: {e}", dir.display());
            std::process::ExitCode::FAILURE
        }
    }
}

/// What the daemon's connections tell the supervisor.
enum FromDaemon {
    Cancel,
    Discard,
    /// Connection number `n` closed.
    Gone(u64),
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
    async fn send(&mut self, message: &Message) {
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

async fn supervise(dir: AttemptDir) -> Result<(), SuperviseError> {
    let launch = dir.read_launch().map_err(|source| SuperviseError::Launch {
        dir: dir.path().display().to_string(),
        source,
    })?;
    let io = |what| move |source| SuperviseError::Io { what, source };
    let _ = std::fs::remove_file(dir.socket());
    let listener = UnixListener::bind(dir.socket()).map_err(io("cannot bind the socket"))?;
    crate::files::create_private_dir(&dir.tmp()).map_err(io("cannot create TMPDIR"))?;
    // A daemon that died before reading it is no reason to stop: the next one takes over.
    let _ = announce_ready();
    let data_dir = launch.config.data_dir.clone();
    let grace = launch.config.supervisor_grace;
    let (reports_tx, mut reports) = mpsc::unbounded_channel();
    let runner = Runner::in_supervisor(launch.config, dir.path()).with_reports(reports_tx);
    let token = CancellationToken::new();
    let attempt = Launch {
        id: launch.id,
        attempt: launch.attempt,
        spec: launch.spec,
        token: token.clone(),
    };
    let mut run = std::pin::pin!(runner.run_here(attempt));
    let (from_daemon, mut commands) = mpsc::unbounded_channel();
    let mut link = Link::default();
    let mut alone_since = Some(Instant::now());
    let mut discard = false;
    let mut check = tokio::time::interval(CHECK_EVERY);
    let kind = loop {
        tokio::select! {
            kind = &mut run => break kind,
            Ok((stream, _)) = listener.accept() => {
                let (reader, writer) = stream.into_split();
                link.number += 1;
                link.writer = Some(writer);
                alone_since = None;
                tokio::spawn(listen(reader, link.number, from_daemon.clone()));
            }
            Some(report) = reports.recv() => {
                if let ReportKind::Progress(p) = report.kind {
                    link.send(&Message::Progress(p)).await;
                }
            }
            Some(command) = commands.recv() => match command {
                FromDaemon::Cancel => token.cancel(),
                FromDaemon::Discard => {
                    discard = true;
                    token.cancel();
                }
                FromDaemon::Gone(n) if n == link.number => {
                    link.writer = None;
                    alone_since = Some(Instant::now());
                }
                FromDaemon::Gone(_) => {}
            },
            _ = check.tick() => {
                if !data_dir.exists() || !dir.path().exists() {
                    discard = true;
                    token.cancel();
                }
                if grace.zip(alone_since).is_some_and(|(g, since)| since.elapsed() >= g) {
                    token.cancel();
                }
            }
        }
    };
    while let Ok(report) = reports.try_recv() {
        if let ReportKind::Progress(p) = report.kind {
            link.send(&Message::Progress(p)).await;
        }
    }
    let _ = std::fs::remove_dir_all(dir.tmp());
    if discard {
        dir.remove();
        return Ok(());
    }
    let ended = Ended::of(kind).expect("an attempt ends with an exit");
    // Synced only when no daemon is connected: a connected one commits it to the store.
    dir.write_outcome(&ended, link.writer.is_none())
        .map_err(io("cannot record the outcome"))?;
    link.send(&Message::Ended).await;
    Ok(())
}

/// Reads the lines of daemon connection number `n` until it closes.
async fn listen(
    reader: tokio::net::unix::OwnedReadHalf,
    n: u64,
    to: mpsc::UnboundedSender<FromDaemon>,
) {
    let mut lines = BufReader::new(reader).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let command = match line.trim() {
            attempt_dir::CANCEL => FromDaemon::Cancel,
            attempt_dir::DISCARD => FromDaemon::Discard,
            _ => continue,
        };
        let _ = to.send(command);
    }
    let _ = to.send(FromDaemon::Gone(n));
}

/// The attempt's lock (descriptor 3, from the daemon) stays with the supervisor: the
/// task does not inherit it, so a task left behind never passes for a live supervisor.
fn keep_lock_from_task() {
    // SAFETY: fcntl(2) on descriptor 3 (failing harmlessly if it is not open).
    unsafe {
        libc::fcntl(3, libc::F_SETFD, libc::FD_CLOEXEC);
    }
}

/// Tells the daemon that started it that the socket listens, then lets go of its
/// standard output (pointed at /dev/null), which is the daemon's pipe.
fn announce_ready() -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::fd::AsRawFd as _;
    let mut out = std::io::stdout();
    let said = writeln!(out, "{}", attempt_dir::READY).and_then(|()| out.flush());
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    // SAFETY: dup2(2) on two open descriptors; replacing fd 1 only redirects later writes.
    if unsafe { libc::dup2(null.as_raw_fd(), 1) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    said
}
