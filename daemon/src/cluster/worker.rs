//! A node's worker: it runs the attempts the leader placed on this node (the leader's own
//! node included), under the node's supervisor, and writes their outcomes back into
//! their placements (see [`crate::store::PlacementWrites`]).
//!
//! Each attempt goes through these steps, each durable before the next:
//! 1. the leader commits the attempt's `Running` record and its placement together;
//! 2. the worker notes its own instance on the placement (`launched_by`), while its lease
//!    runs, and only then hands the attempt to the supervisor;
//! 3. when the attempt ends, the worker writes its outcome into the placement (while its
//!    lease runs) and only then lets the supervisor forget it;
//! 4. the leader commits the outcome with the task's next state and removes the
//!    placement.
//!
//! A worker that starts again (a restart of the node's daemon) takes over from the
//! supervisor what its earlier instance launched: outcomes recorded meanwhile are
//! written, running attempts followed; an attempt the supervisor (alive all along)
//! never received is reported as not started, and one whose supervisor died is
//! interrupted (its leftover processes stopped first). The supervisor is fenced by the
//! node's lease, so a node cut off from the database stops its attempts before the
//! leader may give them to another node.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use orch_protocol::{AttemptOutcome, Progress, TaskId, TaskSpec};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::blocking;
use super::placement::NodeOutcome;
use super::wakeups::Wakeups;
use crate::runner::{Launch, Report, ReportKind, Runner, Steering};
use crate::store::{NodeAttempt, PostgresStore, StoreError};

/// How often the placements are read when no wake-up comes (and the listening connection
/// works).
const PLACEMENT_POLL: Duration = Duration::from_secs(1);
/// How often they are read while the listening connection is down.
const PLACEMENT_POLL_UNHEARD: Duration = Duration::from_millis(200);
/// How long a worker waits before trying a failed store call again.
const RETRY_DELAY: Duration = Duration::from_millis(200);
/// How often at most a worker writes its attempts' progress (the latest of each).
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// How long a node that stops waits for its stopped attempts' ends (the runner's grace
/// between TERM and KILL is 3 s).
const DRAIN_LIMIT: Duration = Duration::from_secs(10);

/// A running worker.
pub struct WorkerHandle {
    task: tokio::task::JoinHandle<usize>,
    stop: CancellationToken,
    drain: CancellationToken,
}

impl WorkerHandle {
    /// Stops the worker. With `leave_running`, the attempts it runs are left to the
    /// supervisor (whose fence stops them once the node's lease runs out); otherwise they
    /// are stopped, and reported as not started (tried again without using an attempt)
    /// unless they succeeded meanwhile. Whether attempts were left running.
    pub async fn stop(self, leave_running: bool) -> bool {
        if leave_running {
            self.stop.cancel();
        } else {
            self.drain.cancel();
        }
        self.task.await.map_or(true, |left| left > 0)
    }
}

/// The node a worker runs attempts for.
#[derive(Debug, Clone)]
pub struct WorkerNode {
    /// The node's name.
    pub name: String,
    /// This daemon's instance.
    pub instance: String,
}

/// Stops the node's worker, if any (see [`WorkerHandle::stop`]); whether it left
/// attempts running under the supervisor.
pub async fn stop(worker: Option<WorkerHandle>, leave_running: bool) -> bool {
    match worker {
        Some(worker) => worker.stop(leave_running).await,
        None => false,
    }
}

/// Starts the worker of node `node` on `store`, running attempts with `runner` (whose
/// supervisor is fenced by the node's lease), until it is stopped. Returns once the
/// attempts the earlier instance left are taken over.
pub async fn start(
    store: Arc<PostgresStore>,
    node: WorkerNode,
    runner: Runner,
) -> anyhow::Result<WorkerHandle> {
    let (reports_to, reports) = mpsc::unbounded_channel();
    let mut worker = Worker {
        store,
        node,
        runner: runner.with_reports(reports_to),
        launched: HashMap::new(),
        nudged: HashMap::new(),
        pending: Vec::new(),
        progress: HashMap::new(),
        progress_written: tokio::time::Instant::now(),
    };
    worker.take_over().await?;
    let (stop, drain) = (CancellationToken::new(), CancellationToken::new());
    let (stopping, draining) = (stop.clone(), drain.clone());
    let task = tokio::spawn(async move { worker.run(reports, stopping, draining).await });
    Ok(WorkerHandle { task, stop, drain })
}

/// A node's worker.
struct Worker {
    store: Arc<PostgresStore>,
    node: WorkerNode,
    runner: Runner,
    /// The attempts handed to the supervisor whose outcomes are not written yet, with the
    /// steering of each (its stop and pause).
    launched: HashMap<(TaskId, u32), Steering>,
    /// How many of each launched attempt's nudges (its row's list) were passed on.
    nudged: HashMap<(TaskId, u32), usize>,
    /// Outcomes to write into their placements.
    pending: Vec<(TaskId, u32, NodeOutcome)>,
    /// The latest progress of running attempts, not written yet.
    progress: HashMap<(TaskId, u32), Progress>,
    /// When progress was last written.
    progress_written: tokio::time::Instant,
}

impl Worker {
    /// Takes over what this node's earlier instance launched (see the module's doc).
    async fn take_over(&mut self) -> anyhow::Result<()> {
        let rows = self.attempts().await?;
        let ours: Vec<(TaskId, u32)> = rows
            .iter()
            .filter(|r| r.launched_by.is_some())
            .map(|r| (r.id, r.attempt))
            .collect();
        let adopted = self.runner.take_over(&ours).await?;
        // The signals and input asked for before this instance started went to the
        // earlier one (or were lost with it): none is passed on twice.
        let nudged: HashMap<(TaskId, u32), usize> = rows
            .iter()
            .map(|r| ((r.id, r.attempt), r.nudges.len()))
            .collect();
        let adopted_keys: HashSet<(TaskId, u32)> =
            adopted.iter().map(|a| (a.id, a.attempt)).collect();
        for a in adopted {
            let key = (a.id, a.attempt);
            let steering = Steering::of(a.token, a.paused, a.nudges);
            self.launched.insert(key, steering);
            self.nudged
                .insert(key, nudged.get(&key).copied().unwrap_or_default());
        }
        let lost: Vec<(TaskId, u32)> = ours
            .into_iter()
            .filter(|key| !adopted_keys.contains(key))
            .collect();
        let ids = lost.iter().map(|(id, _)| *id).collect();
        crate::orphans::kill_leftovers(self.runner.data_dir(), &ids);
        for (id, attempt) in lost {
            tracing::warn!(
                task = id,
                attempt,
                "an attempt this node ran before its restart is interrupted"
            );
            let outcome = NodeOutcome::Exited(AttemptOutcome::Interrupted);
            self.pending.push((id, attempt, outcome));
        }
        Ok(())
    }

    /// Launches new placements and writes outcomes, at every wake-up, report and poll,
    /// until `stop` (leaving the attempts running) or `drain` (stopping them first).
    /// Returns how many attempts are left running.
    async fn run(
        &mut self,
        mut reports: mpsc::UnboundedReceiver<Report>,
        stop: CancellationToken,
        drain: CancellationToken,
    ) -> usize {
        let store = self.store.clone();
        let mut wakeups = Wakeups::new(
            blocking(move || store.placement_wakeups()).await,
            PLACEMENT_POLL,
            PLACEMENT_POLL_UNHEARD,
            "placed attempts",
        );
        let mut look = true;
        loop {
            if !self.pending.is_empty() {
                self.write_outcomes().await;
            }
            if look {
                self.launch_new().await;
            }
            if !self.progress.is_empty() && self.progress_written.elapsed() >= PROGRESS_EVERY {
                self.write_progress().await;
            }
            let retry = if !self.pending.is_empty() {
                Some(RETRY_DELAY)
            } else {
                (!self.progress.is_empty()).then_some(PROGRESS_EVERY)
            };
            look = tokio::select! {
                () = stop.cancelled() => return self.launched.len(),
                () = drain.cancelled() => return self.drain(&mut reports).await,
                Some(report) = reports.recv() => {
                    self.reported(report);
                    while let Ok(report) = reports.try_recv() {
                        self.reported(report);
                    }
                    false
                }
                () = wakeups.next_within(retry) => true,
            };
        }
    }

    /// Notes what the runner says of an attempt: an end, or its latest progress, is to
    /// be written.
    fn reported(&mut self, Report { id, attempt, kind }: Report) {
        let outcome = match kind {
            ReportKind::Exited(outcome) => NodeOutcome::Exited(outcome),
            ReportKind::NotStarted(reason) => NodeOutcome::NotStarted(reason),
            ReportKind::Progress(progress) => {
                if self.launched.contains_key(&(id, attempt)) {
                    self.progress.insert((id, attempt), progress);
                }
                return;
            }
        };
        self.progress.remove(&(id, attempt));
        self.pending.push((id, attempt, outcome));
    }

    /// Writes the latest progress of the running attempts (the leader turns it into
    /// progress events). Progress is advisory: one that cannot be written is dropped.
    async fn write_progress(&mut self) {
        self.progress_written = tokio::time::Instant::now();
        let texts: Vec<(TaskId, u32, String)> = std::mem::take(&mut self.progress)
            .into_iter()
            .filter_map(|((id, attempt), p)| Some((id, attempt, serde_json::to_string(&p).ok()?)))
            .collect();
        let (store, node) = (self.store.clone(), self.node.clone());
        let written =
            blocking(move || store.record_progress(&node.name, &node.instance, &texts)).await;
        if let Err(e) = written {
            tracing::debug!(error = %e, "cannot record the attempts' progress");
        }
    }

    /// The node stops: its attempts are stopped, and once they have ended (within
    /// [`DRAIN_LIMIT`]) their outcomes are written, each as not started (tried again
    /// without using an attempt: the stop was not the task's fault) unless it succeeded.
    /// Returns how many are left running.
    async fn drain(&mut self, reports: &mut mpsc::UnboundedReceiver<Report>) -> usize {
        for steering in self.launched.values() {
            steering.token.cancel();
        }
        let deadline = tokio::time::Instant::now() + DRAIN_LIMIT;
        let ended = |w: &Worker| {
            w.launched
                .keys()
                .all(|k| w.pending.iter().any(|(i, a, _)| (*i, *a) == *k))
        };
        while !ended(self) {
            match tokio::time::timeout_at(deadline, reports.recv()).await {
                Ok(Some(report)) => self.reported(report),
                Ok(None) | Err(_) => break,
            }
        }
        for (_, _, outcome) in &mut self.pending {
            if !matches!(outcome, NodeOutcome::Exited(o) if o.is_success()) {
                *outcome = NodeOutcome::NotStarted("its node stopped".into());
            }
        }
        for _ in 0..3 {
            if self.pending.is_empty() {
                break;
            }
            self.write_outcomes().await;
        }
        self.launched.len()
    }

    /// Writes the pending outcomes; once written (or no longer wanted: the placement was
    /// taken back, or the node's lease ran out), the supervisor forgets them. A failed
    /// write keeps them for the next turn.
    async fn write_outcomes(&mut self) {
        let mut texts = Vec::with_capacity(self.pending.len());
        for (id, attempt, outcome) in &self.pending {
            let text = serde_json::to_string(outcome).unwrap_or_else(|_| "null".into());
            texts.push((*id, *attempt, text));
        }
        let (store, node) = (self.store.clone(), self.node.clone());
        let written =
            blocking(move || store.record_outcomes(&node.name, &node.instance, &texts)).await;
        let (recorded, gone) = match written {
            Ok(answer) => answer,
            Err(e) => return tracing::warn!(error = %e, "cannot record outcomes; trying again"),
        };
        let pending = std::mem::take(&mut self.pending);
        for (id, attempt, outcome) in pending {
            let key = (id, attempt);
            if !recorded.contains(&key) && !gone.contains(&key) {
                // The node's lease ran out for a moment: written once it runs again.
                self.pending.push((id, attempt, outcome));
                continue;
            }
            if gone.contains(&key) {
                tracing::warn!(
                    task = id,
                    attempt,
                    ?outcome,
                    "an outcome the leader no longer waits for is dropped"
                );
            }
            self.launched.remove(&key);
            self.nudged.remove(&key);
            self.runner.release(id, attempt);
        }
    }

    /// Reads this node's placements: launches the new ones (noted first), stops those the
    /// leader asked to stop, and those it took back.
    async fn launch_new(&mut self) {
        let rows = match self.attempts().await {
            Ok(rows) => rows,
            Err(e) => return tracing::warn!(error = %e, "cannot read this node's placements"),
        };
        let placed: HashSet<(TaskId, u32)> = rows.iter().map(|r| (r.id, r.attempt)).collect();
        for (key, steering) in &self.launched {
            let token = &steering.token;
            let waiting = self.pending.iter().any(|(i, a, _)| (*i, *a) == *key);
            if !placed.contains(key) && !waiting && !token.is_cancelled() {
                tracing::warn!(
                    task = key.0,
                    attempt = key.1,
                    "the leader took the attempt back: stopping it"
                );
                token.cancel();
            }
        }
        let mut new = Vec::new();
        for row in rows {
            let key = (row.id, row.attempt);
            let mine = row.launched_by.as_deref() == Some(self.node.instance.as_str());
            match self.launched.get(&key) {
                Some(steering) if row.stop => steering.token.cancel(),
                Some(steering) => {
                    steering.set_paused(row.paused);
                    let passed = self.nudged.entry(key).or_default();
                    for nudge in row.nudges.iter().skip(*passed) {
                        steering.nudge(nudge.clone());
                    }
                    *passed = (*passed).max(row.nudges.len());
                }
                // Noted by this instance, but the answer was lost: noting it again is
                // harmless, and it never reached the supervisor.
                None if row.launched_by.is_none() || mine => new.push(row),
                None => {} // an earlier instance's: taken over at start
            }
        }
        if !new.is_empty() {
            self.launch(new).await;
        }
    }

    /// Notes `rows` as launched by this instance, then hands those noted to the
    /// supervisor (a stop already asked for is passed on at once).
    async fn launch(&mut self, rows: Vec<NodeAttempt>) {
        let keys: Vec<(TaskId, u32)> = rows.iter().map(|r| (r.id, r.attempt)).collect();
        let (store, node) = (self.store.clone(), self.node.clone());
        let marked = blocking(move || store.mark_launched(&node.name, &node.instance, &keys)).await;
        let marked = match marked {
            Ok(marked) => marked,
            Err(e) => {
                return tracing::warn!(error = %e, "cannot take placed attempts; trying again");
            }
        };
        let runtime = tokio::runtime::Handle::current();
        for row in rows
            .into_iter()
            .filter(|r| marked.contains(&(r.id, r.attempt)))
        {
            let spec: TaskSpec = match serde_json::from_str(&row.spec) {
                Ok(spec) => spec,
                Err(e) => {
                    let error = format!("the placed task cannot be read by this node: {e}");
                    let outcome = NodeOutcome::Exited(AttemptOutcome::SpawnFailed { error });
                    self.pending.push((row.id, row.attempt, outcome));
                    continue;
                }
            };
            let (steering, (paused, nudges)) = Steering::new();
            if row.stop {
                steering.token.cancel();
            }
            steering.set_paused(row.paused);
            for nudge in &row.nudges {
                steering.nudge(nudge.clone());
            }
            let token = steering.token.clone();
            self.launched.insert((row.id, row.attempt), steering);
            self.nudged.insert((row.id, row.attempt), row.nudges.len());
            let launch = Launch {
                id: row.id,
                attempt: row.attempt,
                spec,
                token,
                paused,
                nudges,
            };
            self.runner.launch(&runtime, launch);
        }
    }

    /// This node's placements without an outcome.
    async fn attempts(&self) -> Result<Vec<NodeAttempt>, StoreError> {
        let (store, name) = (self.store.clone(), self.node.name.clone());
        blocking(move || store.node_attempts(&name)).await
    }
}
