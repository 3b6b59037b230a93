//! The engine's task: it feeds the state machine, commits each step's batch through the
//! group committer, and has the step's effects carried out only once that batch is
//! durable (commit-before-act; see [`super::executor`]).
//!
//! It also keeps what the state machine must not hold: the cancellation token of each
//! running attempt (the runner's way of stopping it), and the conversion of the runner's
//! [`Report`]s, which arrive on their own channel, into inputs.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::Utc;
use orch_protocol::TaskId;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::effects::{Effects, Step};
use super::executor::{Executor, Expand, MAX_EXPANSIONS, Work};
use super::records::StoreRecords;
use super::state::{EngineState, NodeName, Nodes, running_attempts};
use super::{EngineHandle, Input};
use crate::events::EventBus;
use crate::runner::{Launch, Report, ReportKind, Runner, Steering};
use crate::store::{GroupCommitter, PlacedAttempt, Snapshot, Store, StoreError, WriteBatch};

/// What the engine needs from the rest of the daemon.
pub struct EngineParts {
    /// The store's group committer.
    pub committer: GroupCommitter,
    /// The store, for the committed records of tasks the engine does not hold.
    pub store: Arc<dyn Store>,
    /// Where committed events go.
    pub bus: EventBus,
    /// Starts processes.
    pub runner: Runner,
    /// The nodes attempts run on: this daemon's own (the runner runs them), or a
    /// cluster's (the store's placements carry them to the nodes' workers).
    pub nodes: Nodes,
    /// In a cluster: the attempts placed on nodes as the engine starts.
    pub placement: Option<Placement>,
    /// Cancelled when the engine cannot go on (the store failed): the daemon stops.
    pub fatal: CancellationToken,
    /// Expands scheduled workflows.
    pub expander: Arc<dyn Expand>,
    /// Woken when notifications were put in the outbox (the deliverer waits on it).
    pub outbox: Arc<tokio::sync::Notify>,
}

/// The placements of a cluster's attempts as the engine starts (read from the store).
pub struct Placement {
    /// Every placed attempt: task, attempt and node. An attempt the store has as running
    /// with no placement was never handed to a node (the leader died between the two).
    pub placed: Vec<(TaskId, u32, NodeName)>,
}

/// The engine's task: the state machine and the means to act on its steps.
pub struct Engine {
    state: EngineState,
    committer: GroupCommitter,
    executor: Executor,
    /// The steering of each running attempt (its stop and pause), with the attempt's
    /// number.
    attempts: HashMap<TaskId, (u32, Arc<Steering>)>,
    /// Attempts whose end was reported since the last step was prepared: once that step
    /// is durable, the runner lets go of what it kept for them (in a cluster, that step
    /// removes their placements).
    ended: Vec<(TaskId, u32)>,
    /// Whether attempts are placed on a cluster's nodes rather than run here.
    placed: bool,
}

/// Why the engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineStartError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The supervisor's attempts cannot be taken over.
    #[error(transparent)]
    TakeOver(#[from] crate::runner::TakeOverError),
}

impl Engine {
    /// Takes over the attempts still under a supervisor, stops the processes interrupted
    /// attempts left running, rebuilds the engine from the store's snapshot, commits the
    /// recovery, and starts the engine task. Returns the handle and the task's join
    /// handle.
    pub async fn start(
        snapshot: Snapshot,
        parts: EngineParts,
    ) -> Result<(EngineHandle, tokio::task::JoinHandle<()>), EngineStartError> {
        let (sender, inbox) = mpsc::unbounded_channel();
        let (reporter, reports) = mpsc::unbounded_channel();
        let runner = parts.runner.with_reports(reporter.clone());
        let runtime = tokio::runtime::Handle::current();
        let running = running_attempts(&snapshot);
        let placed = parts.nodes.placed();
        let (adopted, attempts, mut recovered) = match parts.placement {
            Some(placement) => adopt_placed(&running, placement, &reporter),
            None => adopt_supervised(&runner, &running, parts.nodes.here()).await?,
        };
        let now = Utc::now();
        let records = StoreRecords {
            store: parts.store,
            fatal: parts.fatal.clone(),
        };
        let (state, recovery) =
            EngineState::recover(snapshot, Box::new(records), parts.nodes, now, &adopted);
        let (held, queued) = state.held();
        tracing::info!(
            held,
            queued,
            "engine rebuilt: tasks held in full, queued by priority"
        );
        let executor = Executor {
            expander: parts.expander,
            expanding: Arc::new(tokio::sync::Semaphore::new(MAX_EXPANSIONS)),
            outbox: parts.outbox,
            bus: parts.bus,
            runner,
            mailbox: sender.clone(),
            fatal: parts.fatal,
            runtime,
        };
        let mut engine = Engine {
            state,
            committer: parts.committer,
            executor,
            attempts,
            ended: Vec::new(),
            placed,
        };
        let Step { mut batch, effects } = recovery;
        batch.placements.done.append(&mut recovered);
        let work = engine.prepare(&mut batch, effects);
        engine.committer.commit(batch).await?;
        engine.executor.carry_out(work, Ok(()));
        let join = tokio::spawn(engine.run(inbox, reports));
        Ok((EngineHandle { sender }, join))
    }

    /// Turn after turn: every waiting input is handled before the step is committed, so
    /// that one transaction covers as many changes as possible. Ends once a shutdown is
    /// answered.
    async fn run(
        mut self,
        mut inbox: mpsc::UnboundedReceiver<Input>,
        mut reports: mpsc::UnboundedReceiver<Report>,
    ) {
        loop {
            let step = self.state.end_turn(Utc::now());
            self.submit(step);
            if self.state.is_stopped() {
                break;
            }
            // Reports first: what the runner already did (an exit, a failed start) is
            // handled before any request that arrived meanwhile, so a turn sees the
            // attempts as they are.
            let first = tokio::select! {
                biased;
                Some(report) = reports.recv() => Input::Report(report),
                Some(input) = inbox.recv() => input,
                else => break,
            };
            self.feed(first);
            loop {
                let next = match reports.try_recv() {
                    Ok(report) => Input::Report(report),
                    Err(_) => match inbox.try_recv() {
                        Ok(input) => input,
                        Err(_) => break,
                    },
                };
                self.feed(next);
            }
        }
    }

    fn feed(&mut self, input: Input) {
        if let Input::Nodes { holding, .. } = &input {
            for (id, attempt) in self.state.attempts_lost(holding) {
                self.attempts.remove(&id);
                self.ended.push((id, attempt));
            }
        }
        if let Input::Report(Report { id, attempt, kind }) = &input
            && matches!(kind, ReportKind::Exited(_) | ReportKind::NotStarted(_))
            && self.attempts.get(id).is_some_and(|(a, _)| a == attempt)
        {
            self.attempts.remove(id);
            self.ended.push((*id, *attempt));
        }
        self.state.handle(input, Utc::now());
        if self.state.take_compacted() {
            crate::memory::return_freed_memory();
        }
    }

    /// Hands the step's batch to the committer; its effects run once it is durable.
    fn submit(&mut self, step: Step) {
        if step.is_empty() {
            return;
        }
        let Step { mut batch, effects } = step;
        let work = self.prepare(&mut batch, effects);
        let executor = self.executor.clone();
        self.committer.submit(batch, move |result| {
            executor.carry_out(work, result.as_ref().map(|_| ()))
        });
    }

    /// Gives each attempt to launch its token, and finds the tokens of those to stop. In
    /// a cluster, the launches, stops and ends go into `batch` as placements instead: the
    /// nodes' workers act on them once they are committed.
    fn prepare(&mut self, batch: &mut WriteBatch, effects: Effects) -> Work {
        let mut launches = Vec::new();
        for start in effects.launches {
            let (steering, (paused, nudges)) = Steering::new();
            let token = steering.token.clone();
            self.attempts
                .insert(start.id, (start.attempt, Arc::new(steering)));
            match start.node {
                Some(node) => batch.placements.placed.push(PlacedAttempt {
                    id: start.id,
                    attempt: start.attempt,
                    node: node.to_string(),
                    spec: start.spec,
                }),
                None => launches.push(Launch {
                    id: start.id,
                    attempt: start.attempt,
                    spec: start.spec,
                    token,
                    paused,
                    nudges,
                }),
            }
        }
        let mut stops = Vec::new();
        for id in &effects.stops {
            match self.attempts.get(id) {
                Some((attempt, _)) if self.placed => batch.placements.stops.push((*id, *attempt)),
                Some((_, steering)) => stops.push(steering.token.clone()),
                None => {}
            }
        }
        let mut pauses = Vec::new();
        for (id, attempt, paused) in effects.pauses {
            match self.attempts.get(&id) {
                Some((running, _)) if *running != attempt => {} // a later attempt's
                Some(_) if self.placed => batch.placements.pauses.push((id, attempt, paused)),
                Some((_, steering)) => pauses.push((steering.clone(), paused)),
                None => {}
            }
        }
        let mut nudges = Vec::new();
        for (id, attempt, nudge) in effects.nudges {
            match self.attempts.get(&id) {
                Some((running, _)) if *running != attempt => {} // a later attempt's
                Some(_) if self.placed => batch.placements.nudges.push((id, attempt, nudge)),
                Some((_, steering)) => nudges.push((steering.clone(), nudge)),
                None => {}
            }
        }
        let mut ended = std::mem::take(&mut self.ended);
        if self.placed {
            batch.placements.done.append(&mut ended);
        }
        Work {
            events: batch.events.clone(),
            launches,
            stops,
            pauses,
            nudges,
            timers: effects.timers,
            schedule_timers: effects.schedule_timers,
            expansions: effects.expansions,
            outbox_changed: effects.outbox_changed,
            answers: effects.answers,
            removed_logs: effects.removed_logs,
            progress_written: effects.progress_written,
            stopped: effects.stopped,
            settled: effects.settled,
            ended,
        }
    }
}

/// What the engine starts with: the running attempts that go on (by node), the steering
/// of each, and placements to remove.
type Adoption = (
    HashMap<TaskId, NodeName>,
    HashMap<TaskId, (u32, Arc<Steering>)>,
    Vec<(TaskId, u32)>,
);

/// Takes over the attempts still under the data directory's supervisor; the processes
/// the others left running are stopped (they are interrupted).
async fn adopt_supervised(
    runner: &Runner,
    running: &[(TaskId, u32)],
    here: NodeName,
) -> Result<Adoption, EngineStartError> {
    let adopted = runner.take_over(running).await?;
    let launched: HashSet<TaskId> = adopted
        .iter()
        .filter(|a| a.launched)
        .map(|a| a.id)
        .collect();
    let interrupted = running.iter().map(|(id, _)| *id);
    let interrupted = interrupted.filter(|id| !launched.contains(id)).collect();
    crate::orphans::kill_leftovers(runner.data_dir(), &interrupted);
    let nodes = adopted.iter().map(|a| (a.id, here.clone())).collect();
    let attempts = adopted.into_iter().map(|a| {
        let steering = Arc::new(Steering::of(a.token, a.paused, a.nudges));
        (a.id, (a.attempt, steering))
    });
    Ok((nodes, attempts.collect(), Vec::new()))
}

/// In a cluster: every running attempt with a placement goes on, on its node (one whose
/// node is gone is interrupted once the nodes are known); one without was never handed to
/// a node and is reported as not started. Placements of attempts that are not running
/// any more are removed.
fn adopt_placed(
    running: &[(TaskId, u32)],
    placement: Placement,
    reporter: &mpsc::UnboundedSender<Report>,
) -> Adoption {
    let mut placed: HashMap<(TaskId, u32), NodeName> = placement
        .placed
        .into_iter()
        .map(|(id, attempt, node)| ((id, attempt), node))
        .collect();
    let (mut nodes, mut attempts) = (HashMap::new(), HashMap::new());
    for &(id, attempt) in running {
        let node = placed.remove(&(id, attempt)).unwrap_or_else(|| {
            // Reported before any other input: its slot is freed at once.
            let reason = "the leader stopped before placing it on a node".to_string();
            let kind = ReportKind::NotStarted(reason);
            let _ = reporter.send(Report { id, attempt, kind });
            NodeName::from("")
        });
        tracing::info!(task = id, attempt, %node, "following an attempt placed on a node");
        nodes.insert(id, node);
        attempts.insert(id, (attempt, Arc::new(Steering::new().0)));
    }
    let stale: Vec<(TaskId, u32)> = placed.into_keys().collect();
    (nodes, attempts, stale)
}
