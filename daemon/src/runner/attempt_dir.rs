//! The directory of one supervised attempt, `<data dir>/attempts/<task>-<attempt>/`, and
//! what the daemon and the attempt's supervisor exchange through it:
//!
//! - `launch.json`: what to run ([`LaunchFile`]), written by the daemon before it starts
//!   the supervisor;
//! - `sock`: the supervisor's Unix socket. The supervisor sends [`Message`]s (one JSON
//!   object a line: progress lines, then the end); the daemon sends `cancel` or `discard`
//!   lines. A socket that accepts is a live supervisor: no process id is trusted, so a
//!   reused pid is never mistaken for one;
//! - `outcome.json`: how the attempt ended ([`Ended`]), written atomically and synced by
//!   the supervisor before it says so and exits;
//! - `lock`: locked (flock) by the daemon before it starts the supervisor, and held by
//!   the supervisor for its whole life through the descriptor it inherits (fd 3): a lock
//!   that is taken means a supervisor lives, even one still starting;
//! - `params.json` (large parameters) and `tmp/` (the attempt's `TMPDIR`).
//!
//! The daemon removes the directory once the outcome is committed.

use std::path::{Path, PathBuf};

use orch_protocol::{AttemptOutcome, Progress, TaskId, TaskSpec};
use serde::{Deserialize, Serialize};

use super::{ReportKind, RunnerConfig};

/// The directory of supervised attempts, in the data directory.
const ATTEMPTS_DIR: &str = "attempts";

/// The line the supervisor prints on its standard output once its socket listens.
pub(super) const READY: &str = "ready";
/// The daemon's line asking the supervisor to stop the attempt (TERM, then KILL).
pub(super) const CANCEL: &str = "cancel";
/// The daemon's line asking the supervisor to stop an attempt the store does not know,
/// and to leave no outcome.
pub(super) const DISCARD: &str = "discard";

/// One attempt's directory.
#[derive(Debug, Clone)]
pub(super) struct AttemptDir(PathBuf);

/// What a supervisor runs.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct LaunchFile {
    /// The runner's settings.
    pub config: RunnerConfig,
    /// The task.
    pub id: TaskId,
    /// Which attempt.
    pub attempt: u32,
    /// What to run.
    pub spec: TaskSpec,
}

/// How a supervised attempt ended, as its supervisor recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Ended {
    /// What became of it.
    pub outcome: EndedKind,
    /// When the supervisor recorded it (milliseconds since the Unix epoch).
    pub at_ms: i64,
}

/// What became of a supervised attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum EndedKind {
    /// It ran and ended.
    Exited(AttemptOutcome),
    /// It could not start for lack of system resources.
    NotStarted(String),
}

/// A line from the supervisor to the daemon.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Message {
    /// The task printed a progress line.
    Progress(Progress),
    /// The attempt ended; its outcome file is written.
    Ended,
}

impl Ended {
    /// The record of `kind` (an exit or a failure to start), now.
    pub fn of(kind: ReportKind) -> Option<Ended> {
        let outcome = match kind {
            ReportKind::Exited(outcome) => EndedKind::Exited(outcome),
            ReportKind::NotStarted(reason) => EndedKind::NotStarted(reason),
            ReportKind::Progress(_) => return None,
        };
        let at_ms = chrono::Utc::now().timestamp_millis();
        Some(Ended { outcome, at_ms })
    }

    /// The report the engine gets.
    pub fn report(self) -> ReportKind {
        match self.outcome {
            EndedKind::Exited(outcome) => ReportKind::Exited(outcome),
            EndedKind::NotStarted(reason) => ReportKind::NotStarted(reason),
        }
    }
}

impl AttemptDir {
    /// The directory of attempt `attempt` of task `id` of the daemon whose data
    /// directory is `data_dir`.
    pub fn of(data_dir: &Path, id: TaskId, attempt: u32) -> AttemptDir {
        AttemptDir(attempts_dir(data_dir).join(format!("{id}-{attempt}")))
    }

    /// The directory at `path` (as a supervisor is given it).
    pub fn at(path: &Path) -> AttemptDir {
        AttemptDir(path.to_path_buf())
    }

    /// The directory itself.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The task and attempt a directory name stands for.
    pub fn parse(name: &str) -> Option<(TaskId, u32)> {
        let (id, attempt) = name.split_once('-')?;
        Some((id.parse().ok()?, attempt.parse().ok()?))
    }

    /// Where the launch is described.
    pub fn launch_file(&self) -> PathBuf {
        self.0.join("launch.json")
    }

    /// The supervisor's socket.
    pub fn socket(&self) -> PathBuf {
        self.0.join("sock")
    }

    /// The attempt's large parameters, if any.
    pub fn params_file(&self) -> PathBuf {
        self.0.join("params.json")
    }

    /// The attempt's private temporary directory (its `TMPDIR`).
    pub fn tmp(&self) -> PathBuf {
        self.0.join("tmp")
    }

    /// Creates and locks the lock file (see the module's doc); the lock lasts as long as
    /// the returned file or a process that inherited it.
    pub fn lock(&self) -> std::io::Result<std::fs::File> {
        use std::os::fd::AsRawFd as _;
        let file = std::fs::File::create(self.0.join("lock"))?;
        // SAFETY: flock(2) on an open descriptor.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(file)
    }

    /// True when a supervisor holds the lock (it lives, or is starting).
    pub fn is_locked(&self) -> bool {
        use std::os::fd::AsRawFd as _;
        let Ok(file) = std::fs::File::open(self.0.join("lock")) else {
            return false;
        };
        // SAFETY: flock(2) on an open descriptor; the lock (if taken) goes with `file`.
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) != 0 }
    }

    fn outcome_file(&self) -> PathBuf {
        self.0.join("outcome.json")
    }

    /// Creates the directory (private) with `launch` in it.
    pub fn create(&self, launch: &LaunchFile) -> std::io::Result<()> {
        crate::files::create_private_dir(&self.0)?;
        let json = serde_json::to_vec(launch).map_err(std::io::Error::other)?;
        std::fs::write(self.launch_file(), json)
    }

    /// What to run, as the daemon described it.
    pub fn read_launch(&self) -> std::io::Result<LaunchFile> {
        let bytes = std::fs::read(self.launch_file())?;
        serde_json::from_slice(&bytes).map_err(std::io::Error::other)
    }

    /// How the attempt ended, once its supervisor recorded it.
    pub fn read_outcome(&self) -> Option<Ended> {
        let bytes = std::fs::read(self.outcome_file()).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Records how the attempt ended, atomically (a reader sees all of it or nothing);
    /// with `sync`, durably too (the file and the directory entry synced). Without, the
    /// file survives the death of any process but not of the machine: enough while a
    /// daemon is connected, as it commits the outcome to the store itself.
    pub fn write_outcome(&self, ended: &Ended, sync: bool) -> std::io::Result<()> {
        let json = serde_json::to_vec(ended).map_err(std::io::Error::other)?;
        crate::files::replace_file(&self.outcome_file(), &json, 0o600, sync)?;
        if sync {
            std::fs::File::open(&self.0)?.sync_all()?;
        }
        Ok(())
    }

    /// Removes the directory and everything in it (a missing one is fine).
    pub fn remove(&self) {
        match std::fs::remove_dir_all(&self.0) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                tracing::warn!(dir = %self.0.display(), error = %e, "cannot remove an attempt's directory");
            }
            _ => {}
        }
    }
}

/// The directory of supervised attempts of the daemon whose data directory is `data_dir`.
pub(super) fn attempts_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(ATTEMPTS_DIR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_outcomes_round_trip() {
        let root = tempfile::tempdir().unwrap();
        let dir = AttemptDir::of(root.path(), 42, 3);
        assert_eq!(
            AttemptDir::parse(&dir.path().file_name().unwrap().to_string_lossy()),
            Some((42, 3))
        );
        assert_eq!(AttemptDir::parse("x-1"), None);
        std::fs::create_dir_all(dir.path()).unwrap();
        assert_eq!(dir.read_outcome(), None);
        let ended =
            Ended::of(ReportKind::Exited(AttemptOutcome::TimedOut { after_ms: 5 })).unwrap();
        dir.write_outcome(&ended, true).unwrap();
        assert_eq!(dir.read_outcome(), Some(ended.clone()));
        let later = Ended::of(ReportKind::NotStarted("no fds".into())).unwrap();
        dir.write_outcome(&later, false).unwrap();
        assert_eq!(dir.read_outcome(), Some(later));
        dir.remove();
        assert!(!dir.path().exists());
    }
}
