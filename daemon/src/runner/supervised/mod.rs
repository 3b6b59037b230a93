//! The daemon's side of supervision: one connection to the supervisor of its data
//! directory (see [`super::supervisor`]), started when none lives. Each launch is a
//! message on it; progress lines and outcomes come back on it and go to the engine as
//! reports. At start the daemon takes over what the supervisor holds: outcomes of
//! attempts that ended while no daemon was there, attempts still running (followed
//! again), and attempts the store does not know (stopped).
//!
//! A supervisor that goes away (killed) leaves the attempts it ran interrupted: their
//! leftovers are stopped, and the next launch starts a new supervisor.
//!
//! [`link`] holds the connection itself: starting the supervisor, its hello, the writer
//! and reader tasks, and what a closed connection interrupts.

mod link;

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use orch_protocol::{AttemptOutcome, Nudge, TaskId};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::log::lock;
use super::wire::{self, AttemptKey, Hello, SupervisorDir, ToSupervisor};
use super::{Launch, ReportKind, Reporter, Runner, StartError, Steered};
use link::{Link, line_of};

/// An attempt left running (or ended) under the supervisor, which this daemon now
/// follows.
pub struct Adopted {
    /// The task.
    pub id: TaskId,
    /// Which attempt.
    pub attempt: u32,
    /// Cancelled to stop it.
    pub token: CancellationToken,
    /// Set to true to pause it, to false to resume it.
    pub paused: watch::Sender<bool>,
    /// Signals and input for it.
    pub nudges: mpsc::UnboundedSender<Nudge>,
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
    /// The node's lease deadlines (a daemon of a cluster), passed on to every connection.
    fence: Option<watch::Receiver<Option<tokio::time::Instant>>>,
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
                let line = format!("orch: could not start the supervisor: {error}\n");
                let log = self.task_log(launch.id, launch.attempt);
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
        // The launch goes first: the follower may pass a pause on at once.
        let _ = link.to.send(line);
        let steered = (launch.paused, launch.nudges);
        let follower = self.follower(&link, key, reporter, launch.token, steered);
        state.followers.insert(key, follower);
    }

    /// A follower of attempt `key` on `link`, whose cancel goes to the supervisor once
    /// `token` is cancelled, and each change of its pause (the current value first, when
    /// it is a pause) and each nudge.
    fn follower(
        &self,
        link: &Link,
        key: AttemptKey,
        reporter: Reporter,
        token: CancellationToken,
        (mut paused, mut nudges): Steered,
    ) -> Follower {
        let to = link.clone();
        let watcher = tokio::spawn(async move {
            let (id, attempt) = key;
            let pause = |paused: bool| ToSupervisor::Pause {
                id,
                attempt,
                paused,
            };
            if *paused.borrow_and_update() {
                to.send(&pause(true));
            }
            let mut nudges_open = true;
            loop {
                tokio::select! {
                    () = token.cancelled() => break,
                    changed = paused.changed() => match changed {
                        Ok(()) => to.send(&pause(*paused.borrow_and_update())),
                        Err(_) => {
                            token.cancelled().await;
                            break;
                        }
                    },
                    nudge = nudges.recv(), if nudges_open => match nudge {
                        Some(nudge) => to.send(&ToSupervisor::Nudge { id, attempt, nudge }),
                        None => nudges_open = false,
                    },
                }
            }
            to.send(&ToSupervisor::Cancel { id, attempt });
        });
        Follower {
            reporter,
            generation: link.generation,
            watcher: watcher.abort_handle(),
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
        self.check_protocol(&hello)?;
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
            let (paused, paused_rx) = watch::channel(false);
            let (nudges, nudges_rx) = mpsc::unbounded_channel();
            let launched = if let Some(ended) = ended.remove(&key) {
                tracing::info!(task = id, attempt, outcome = ?ended.outcome, at_ms = ended.at_ms, "collected an attempt that ended while the daemon was down");
                reporter.send(ended.report());
                true
            } else if alive.remove(&key) {
                tracing::info!(task = id, attempt, "re-attached to a running attempt");
                let steered = (paused_rx, nudges_rx);
                let follower = self.follower(&link, key, reporter, token.clone(), steered);
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
                paused,
                nudges,
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

    /// Refuses a supervisor that speaks another version of the messages.
    fn check_protocol(&self, hello: &Hello) -> Result<(), TakeOverError> {
        if hello.protocol == wire::PROTOCOL {
            return Ok(());
        }
        let dir = SupervisorDir::of(&self.config.data_dir);
        Err(TakeOverError {
            dir: dir.path().display().to_string(),
            found: hello.protocol,
            ours: wire::PROTOCOL,
        })
    }

    /// Fences the supervisor by the node's lease: each deadline of `deadlines` is sent on
    /// every connection, as it opens and as it moves (see [`ToSupervisor::Fence`]).
    pub fn fence_with(&self, deadlines: watch::Receiver<Option<tokio::time::Instant>>) {
        self.supervision.state().fence = Some(deadlines);
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
