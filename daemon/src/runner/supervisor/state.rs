//! What the supervisor holds (each attempt, running or ended with its outcome not yet
//! released), who listens (the one daemon connection), and the journal of outcomes no
//! daemon has committed; the supervisor's loop ([`super`]) feeds it.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use orch_protocol::Nudge;
use tokio::io::AsyncWriteExt as _;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::super::wire::{
    self, AttemptKey, EndedAttempt, FromSupervisor, Hello, SupervisorDir, ToSupervisor,
    monotonic_ms,
};
use super::super::{Launch, Report, ReportKind, Runner};
use super::fence::Fence;
use super::writeln_stderr;

/// An attempt's end: which, how, and when (the monotonic clock, in ms).
pub(super) type Ended = (AttemptKey, ReportKind, u64);

/// How long a supervisor with nothing to run and no daemon waits before it exits.
const IDLE_EXIT: Duration = Duration::from_secs(2);

/// An attempt the supervisor holds.
enum Held {
    /// Running; cancelled to stop it; `discard` once it is to leave no outcome.
    Running {
        token: CancellationToken,
        /// True while it is to be paused.
        paused: watch::Sender<bool>,
        /// Signals and input for it.
        nudges: mpsc::UnboundedSender<Nudge>,
        discard: bool,
        /// When it was launched (the monotonic clock, in ms).
        launched_ms: u64,
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
pub(super) struct Supervisor {
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
    /// The node's lease (a daemon of a cluster sets it), watched by its own task.
    fence: Arc<Fence>,
    /// Attempts ending: their key and how.
    ended_tx: mpsc::UnboundedSender<Ended>,
    /// Progress lines of running attempts.
    reports_tx: mpsc::UnboundedSender<Report>,
}

impl Supervisor {
    /// The state of a new supervisor in `dir`, holding the outcomes of the journal an
    /// earlier one left; attempts report their end on `ended_tx`, their progress on
    /// `reports_tx`.
    pub(super) fn new(
        dir: SupervisorDir,
        fence: Arc<Fence>,
        ended_tx: mpsc::UnboundedSender<Ended>,
        reports_tx: mpsc::UnboundedSender<Report>,
    ) -> Supervisor {
        let journal = dir.read_journal();
        Supervisor {
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
            fence,
            ended_tx,
            reports_tx,
        }
    }

    /// True while a daemon is connected (a second connection is then refused).
    pub(super) fn linked(&self) -> bool {
        self.link.writer.is_some()
    }

    /// The number of the latest daemon connection.
    pub(super) fn link_number(&self) -> u64 {
        self.link.number
    }

    /// The supervisor's directory.
    pub(super) fn dir(&self) -> &SupervisorDir {
        &self.dir
    }

    /// A daemon connected (none was): it is told what is held.
    pub(super) async fn connected(&mut self, writer: OwnedWriteHalf) {
        self.link.number += 1;
        self.link.writer = Some(writer);
        self.alone_since = None;
        self.grace_spent = false;
        self.fence.clear();
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
    pub(super) fn obey(&mut self, message: ToSupervisor) {
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
            ToSupervisor::Pause {
                id,
                attempt,
                paused: wanted,
            } => {
                if let Some(Held::Running { paused, .. }) = self.held.get(&(id, attempt)) {
                    paused.send_replace(wanted);
                }
            }
            ToSupervisor::Nudge { id, attempt, nudge } => {
                if let Some(Held::Running { nudges, .. }) = self.held.get(&(id, attempt)) {
                    let _ = nudges.send(nudge);
                }
            }
            ToSupervisor::Discard { id, attempt } => {
                if let Some(Held::Running { token, discard, .. }) =
                    self.held.get_mut(&(id, attempt))
                {
                    *discard = true;
                    token.cancel();
                }
            }
            ToSupervisor::Fence { until_monotonic_ms } => self.fence.renew(until_monotonic_ms),
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
        config: super::super::RunnerConfig,
    ) {
        if matches!(self.held.get(&key), Some(Held::Running { .. })) {
            return;
        }
        self.grace = config.supervisor_grace;
        let token = CancellationToken::new();
        if self.orphaned || self.grace_spent {
            token.cancel();
        }
        if self.fence.refuses_launches() {
            // Reported interrupted: launched before the lapse, ended after it.
            token.cancel();
        }
        let (paused, paused_rx) = watch::channel(false);
        let (nudges, nudges_rx) = mpsc::unbounded_channel();
        self.held.insert(
            key,
            Held::Running {
                token: token.clone(),
                paused,
                nudges,
                discard: self.orphaned,
                launched_ms: monotonic_ms(),
            },
        );
        let runner =
            Runner::in_supervisor(config, self.dir.clone()).with_reports(self.reports_tx.clone());
        let launch = Launch {
            id: key.0,
            attempt: key.1,
            spec,
            token,
            paused: paused_rx,
            nudges: nudges_rx,
        };
        let ended = self.ended_tx.clone();
        tokio::spawn(async move {
            let kind = runner.run_here(launch).await;
            let _ = ended.send((key, kind, monotonic_ms()));
        });
    }

    /// Passes a progress line on to the connected daemon.
    pub(super) async fn progress(&mut self, report: Report) {
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
    pub(super) async fn ended(&mut self, (key, kind, exited_ms): Ended) {
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
        let stopped = match self.held.get(&key) {
            Some(Held::Running { launched_ms, .. }) => self.fence.stopped(*launched_ms, exited_ms),
            _ => false,
        };
        let kind = if stopped {
            ReportKind::Exited(orch_protocol::AttemptOutcome::Interrupted)
        } else {
            kind
        };
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
    /// release are journaled. A fenced supervisor (of a cluster's node) keeps its attempts
    /// until its fence: the node's next daemon may take them over by then.
    pub(super) fn gone(&mut self, n: u64) {
        if n == self.link.number {
            self.link.writer = None;
            self.alone_since.get_or_insert_with(Instant::now);
            self.save_journal();
        }
    }

    /// The periodic check; true when the supervisor is to exit.
    pub(super) fn check(&mut self, data_dir: &Path) -> bool {
        let running = self
            .held
            .values()
            .filter(|h| matches!(h, Held::Running { .. }));
        let running = running.count();
        if !self.orphaned && !data_dir.exists() {
            self.orphaned = true;
            for held in self.held.values_mut() {
                if let Held::Running { token, discard, .. } = held {
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
