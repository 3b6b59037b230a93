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
//! A daemon of a cluster fences it: past the deadline its lease gives, with no later
//! one, every attempt is killed and reported interrupted (the node may no longer run
//! them: another takes over once the lease runs out).
//!
//! It stops every attempt (leaving no outcome) when its data directory disappears; with a
//! grace period it also stops them (a cancel) once no daemon has been connected for that
//! long. With no daemon connected and nothing running, it exits after a short while.
//! A supervisor killed outright leaves interrupted attempts: the daemon sees its
//! connection close and stops what they left running by their markers (see
//! [`crate::orphans`]); a daemon that starts after both died does the same.

mod fence;
mod state;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::net::UnixListener;
use tokio::sync::mpsc;

use super::ReportKind;
use super::wire::{self, AttemptKey, SupervisorDir, ToSupervisor};
use state::Supervisor;

/// How often the supervisor checks that its data directory exists and its daemon is near.
const CHECK_EVERY: Duration = Duration::from_secs(1);

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
    let fence = Arc::new(fence::Fence::default());
    tokio::spawn(fence.clone().watch(data_dir.to_path_buf()));
    let mut state = Supervisor::new(dir, fence, ended_tx, reports_tx);
    let (from_daemon, mut commands) = mpsc::unbounded_channel();
    let mut check = tokio::time::interval(CHECK_EVERY);
    loop {
        tokio::select! {
            Ok((stream, _)) = listener.accept() => {
                // One daemon at a time: a second connection while one is open (another
                // client of the same user, or a new daemon before the old one's
                // connection closed) is refused; a new daemon tries again.
                if !wire::same_user(&stream) || state.linked() {
                    continue;
                }
                let (reader, writer) = stream.into_split();
                state.connected(writer).await;
                tokio::spawn(listen(reader, state.link_number(), from_daemon.clone()));
            }
            Some(report) = reports.recv() => state.progress(report).await,
            Some(end) = ended.recv() => state.ended(end).await,
            Some(command) = commands.recv() => match command {
                FromDaemon::Says(n, message) if n == state.link_number() => state.obey(message),
                FromDaemon::Unreadable(n, key, error) if n == state.link_number() => {
                    let outcome = orch_protocol::AttemptOutcome::SpawnFailed { error };
                    state.ended((key, ReportKind::Exited(outcome), wire::monotonic_ms())).await;
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
    let _ = std::fs::remove_file(state.dir().socket());
    Ok(())
}

/// Writes `line` to the supervisor's standard error (`supervisors.log`).
fn writeln_stderr(line: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    writeln!(std::io::stderr(), "{line}")
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
