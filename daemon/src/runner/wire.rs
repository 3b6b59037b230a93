//! What the daemon and the supervisor of its data directory share (see
//! [`super::supervisor`]): the supervisor's directory, `<data dir>/supervisor/`, and the
//! messages they exchange over its socket.
//!
//! - `lock`: locked (flock) by the supervisor for its whole life: a lock that is taken
//!   means a supervisor lives, even one still starting. No process id is trusted, so a
//!   reused pid is never mistaken for one;
//! - `sock`: the supervisor's Unix socket. One daemon at a time is connected (a second
//!   connection while one is open is closed unread); each side sends one JSON object a line
//!   ([`ToSupervisor`], [`FromSupervisor`]). The supervisor speaks first, with a
//!   [`Hello`] that lists the attempts it holds;
//! - `ended.json`: the outcomes no daemon has committed yet ([`EndedAttempt`]s), written
//!   atomically and synced whenever they change while no daemon is connected (and when
//!   one goes away), so that they outlive the supervisor too;
//! - `attempts/<task>-<attempt>/`: each running attempt's private `TMPDIR`, beside its
//!   large parameters file (`<task>-<attempt>.params.json`), removed once it ends.

use std::path::{Path, PathBuf};

use orch_protocol::{AttemptOutcome, Nudge, Progress, TaskId, TaskSpec};
use serde::{Deserialize, Serialize};

use super::{ReportKind, RunnerConfig};

/// The version of the messages below; a daemon refuses a supervisor that speaks another.
/// Version 2 added [`ToSupervisor::Pause`], 3 [`ToSupervisor::Nudge`].
pub(super) const PROTOCOL: u32 = 3;

/// The line a new supervisor prints on its standard output once its socket listens.
pub(super) const READY: &str = "ready";
/// The line a new supervisor prints when another one holds the lock already.
pub(super) const BUSY: &str = "busy";

/// A task's attempt: the key of everything the supervisor holds.
pub(super) type AttemptKey = (TaskId, u32);

/// A message from the daemon.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case")]
pub(super) enum ToSupervisor {
    /// Run this attempt (ignored when it runs already).
    Launch {
        /// The task.
        id: TaskId,
        /// Which attempt.
        attempt: u32,
        /// What to run.
        spec: Box<TaskSpec>,
        /// The runner's settings, as the daemon has them now.
        config: Box<RunnerConfig>,
    },
    /// Stop the attempt (TERM, then KILL); its outcome follows.
    Cancel {
        /// The task.
        id: TaskId,
        /// Which attempt.
        attempt: u32,
    },
    /// Pause the attempt's process group (SIGSTOP), or continue it (SIGCONT).
    Pause {
        /// The task.
        id: TaskId,
        /// Which attempt.
        attempt: u32,
        /// Paused (true) or running (false).
        paused: bool,
    },
    /// Send a signal to the attempt's process group, or input to its standard input.
    Nudge {
        /// The task.
        id: TaskId,
        /// Which attempt.
        attempt: u32,
        /// The signal or input.
        nudge: Nudge,
    },
    /// Stop an attempt the store does not know, and forget it (no outcome).
    Discard {
        /// The task.
        id: TaskId,
        /// Which attempt.
        attempt: u32,
    },
    /// The attempt's outcome is committed: forget it.
    Release {
        /// The task.
        id: TaskId,
        /// Which attempt.
        attempt: u32,
    },
    /// The node's lease (a daemon of a cluster) lets attempts run until then: past it
    /// without a later fence, every running attempt is killed and reported interrupted,
    /// and launches are refused. Each connection starts unfenced.
    Fence {
        /// The moment, by the host's monotonic clock ([`monotonic_ms`]): a fence read late
        /// (sent before the daemon was paused) renews nothing.
        until_monotonic_ms: u64,
    },
}

/// A message from the supervisor.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "is", rename_all = "snake_case")]
pub(super) enum FromSupervisor {
    /// The first line of every connection.
    Hello(Hello),
    /// An attempt's task printed a progress line.
    Progress {
        /// The task.
        id: TaskId,
        /// Which attempt.
        attempt: u32,
        /// The line.
        progress: Progress,
    },
    /// An attempt ended.
    Ended(EndedAttempt),
}

/// What a supervisor holds when a daemon connects.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Hello {
    /// The version of the messages it speaks ([`PROTOCOL`]).
    pub protocol: u32,
    /// True when no daemon ever connected to it before this one.
    pub fresh: bool,
    /// The attempts still running.
    pub running: Vec<AttemptKey>,
    /// The attempts that ended, with outcomes not yet released.
    pub ended: Vec<EndedAttempt>,
}

/// How an attempt ended, as its supervisor recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct EndedAttempt {
    /// The task.
    pub id: TaskId,
    /// Which attempt.
    pub attempt: u32,
    /// What became of it.
    pub outcome: EndedKind,
    /// When the supervisor recorded it (milliseconds since the Unix epoch).
    pub at_ms: i64,
}

/// What became of an attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum EndedKind {
    /// It ran and ended.
    Exited(AttemptOutcome),
    /// It could not start for lack of system resources.
    NotStarted(String),
}

impl EndedAttempt {
    /// The record of attempt `key` ending as `kind` (an exit or a failure to start), now.
    pub fn of(key: AttemptKey, kind: ReportKind) -> Option<EndedAttempt> {
        let outcome = match kind {
            ReportKind::Exited(outcome) => EndedKind::Exited(outcome),
            ReportKind::NotStarted(reason) => EndedKind::NotStarted(reason),
            ReportKind::Progress(_) => return None,
        };
        let at_ms = chrono::Utc::now().timestamp_millis();
        let (id, attempt) = key;
        Some(EndedAttempt {
            id,
            attempt,
            outcome,
            at_ms,
        })
    }

    /// The attempt it is about.
    pub fn key(&self) -> AttemptKey {
        (self.id, self.attempt)
    }

    /// The report the engine gets.
    pub fn report(self) -> ReportKind {
        match self.outcome {
            EndedKind::Exited(outcome) => ReportKind::Exited(outcome),
            EndedKind::NotStarted(reason) => ReportKind::NotStarted(reason),
        }
    }
}

/// The host's monotonic clock (CLOCK_MONOTONIC) in milliseconds: the same in the daemon
/// and its supervisor, unlike each process's own `Instant`s, and never stepped.
pub(super) fn monotonic_ms() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime(2) writes the time into the struct we own.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now);
    }
    let secs = u64::try_from(now.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(now.tv_nsec).unwrap_or(0);
    secs * 1000 + nanos / 1_000_000
}

/// True when the peer of `stream` runs as this process's user: the daemon and its
/// supervisor talk only to each other (their directory is private already; this holds
/// even if its mode was changed).
pub(super) fn same_user(stream: &tokio::net::UnixStream) -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    let me = unsafe { libc::geteuid() };
    stream.peer_cred().is_ok_and(|c| c.uid() == me)
}

/// The supervisor's directory of one data directory.
#[derive(Debug, Clone)]
pub(super) struct SupervisorDir(PathBuf);

impl SupervisorDir {
    /// The supervisor's directory of the daemon whose data directory is `data_dir`.
    pub fn of(data_dir: &Path) -> SupervisorDir {
        SupervisorDir(data_dir.join("supervisor"))
    }

    /// The directory itself.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The supervisor's socket.
    pub fn socket(&self) -> PathBuf {
        self.0.join("sock")
    }

    /// The private `TMPDIR` of a running attempt.
    pub fn scratch(&self, (id, attempt): AttemptKey) -> PathBuf {
        self.0.join("attempts").join(format!("{id}-{attempt}"))
    }

    /// The large parameters file of a running attempt.
    pub fn params_file(&self, (id, attempt): AttemptKey) -> PathBuf {
        self.0
            .join("attempts")
            .join(format!("{id}-{attempt}.params.json"))
    }

    fn lock_file(&self) -> PathBuf {
        self.0.join("lock")
    }

    fn journal(&self) -> PathBuf {
        self.0.join("ended.json")
    }

    /// Creates (when missing) and locks the lock file; `None` when another supervisor
    /// holds it. The lock lasts as long as the returned file.
    pub fn lock(&self) -> std::io::Result<Option<std::fs::File>> {
        use std::os::unix::fs::PermissionsExt as _;
        crate::files::create_private_dir(&self.0)?;
        // An existing directory is made private too (the socket in it must be).
        std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o700))?;
        crate::files::lock_exclusive(&self.lock_file())
    }

    /// True when a supervisor holds the lock (it lives, or is starting).
    pub fn is_locked(&self) -> bool {
        use std::os::fd::AsRawFd as _;
        let Ok(file) = std::fs::File::open(self.lock_file()) else {
            return false;
        };
        // SAFETY: flock(2) on an open descriptor; the lock (if taken) goes with `file`.
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) != 0 }
    }

    /// The outcomes recorded by an earlier supervisor and not released (none when the
    /// file is missing or unreadable: a torn file cannot exist, it is replaced
    /// atomically).
    pub fn read_journal(&self) -> Vec<EndedAttempt> {
        std::fs::read(self.journal())
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Replaces the journal with `ended`, atomically and durably (the file and its
    /// directory entry synced); an empty list removes it.
    pub fn write_journal(&self, ended: &[&EndedAttempt]) -> std::io::Result<()> {
        if ended.is_empty() {
            match std::fs::remove_file(self.journal()) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(e),
                // The removal is made durable, so that released outcomes never come back.
                Ok(()) => return std::fs::File::open(&self.0)?.sync_all(),
            }
        }
        let json = serde_json::to_vec(ended).map_err(std::io::Error::other)?;
        crate::files::write_atomically(&self.journal(), &json, 0o600)?;
        std::fs::File::open(&self.0)?.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_round_trips_and_an_empty_one_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let dir = SupervisorDir::of(root.path());
        let lock = dir.lock().unwrap().expect("the lock is free");
        assert!(dir.is_locked());
        assert!(
            dir.lock().unwrap().is_none(),
            "a second supervisor is refused"
        );
        assert_eq!(dir.read_journal(), vec![]);
        let timed_out = ReportKind::Exited(AttemptOutcome::TimedOut { after_ms: 5 });
        let a = EndedAttempt::of((42, 3), timed_out).unwrap();
        let b = EndedAttempt::of((7, 1), ReportKind::NotStarted("no fds".into())).unwrap();
        dir.write_journal(&[&a, &b]).unwrap();
        assert_eq!(dir.read_journal(), vec![a.clone(), b]);
        dir.write_journal(&[&a]).unwrap();
        assert_eq!(dir.read_journal(), vec![a]);
        dir.write_journal(&[]).unwrap();
        assert!(!dir.journal().exists());
        drop(lock);
        assert!(!dir.is_locked());
    }
}
