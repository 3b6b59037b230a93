//! The engine's state machine: every task's and workflow's in-memory state, changed by one
//! [`Input`] at a time, with no I/O, no clock and no runtime.
//!
//! [`EngineState::handle`] changes memory and adds to the current [`Step`] what must be
//! written (task and workflow records, events, audit records) and what must follow once
//! that is durable; [`EngineState::end_turn`] moves the workflows on, starts queued tasks
//! while slots are free, adds the coalesced progress, and hands the step over. The time
//! is passed in with each input.
//!
//! - `requests`: submit, cancel and retry of tasks, and refusals;
//! - `stash`: stash, enqueue and edit of tasks that have not started;
//! - `transitions`: a task's first state, its dependants released or failed, requeues;
//! - `attempts`: starting attempts, their ends, retries with backoff, progress;
//! - `workflows` (requests), `workflow_advance` (success, failure, rollback rounds) and
//!   `workflow_limits` (the per-workflow parallel limit);
//! - `groups`: groups with their parallel limits, and pausing the queue, a group or a
//!   running task;
//! - `placement`: the nodes attempts run on (this daemon, or a cluster's), their slots
//!   and labels;
//! - `recovery` (after a restart), `clean` (`orch clean`), `queue`, `backoff`;
//! - `live`: which tasks are held in full, which by their priority only (queued ones),
//!   which not at all (finished ones), and the reads of the store's committed records
//!   that this needs (the state machine's only I/O, through [`Records`]).

mod attempts;
mod backoff;
mod clean;
mod groups;
mod live;
pub(super) mod notify;
mod nudges;
pub mod placement;
mod queue;
mod recovery;
mod requests;
pub mod retention;
mod schedules;
mod stash;
mod transitions;
mod workflow_advance;
mod workflow_limits;
mod workflows;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use orch_protocol::{
    Actor, ErrorReply, Event, EventKind, QueueControls, Task, TaskId, TaskState, TestEnv, Workflow,
    WorkflowId,
};
use tokio::sync::oneshot;

use super::effects::{Answerable, Step};
use super::{Command, Input, Reply};
use crate::audit::AuditRecord;
use crate::runner::{Report, ReportKind};
use crate::store::TaskWrite;
use queue::ReadyQueue;

pub use live::Records;
pub use placement::{NodeName, NodeOffer, Nodes};
pub use recovery::running_attempts;

/// What came of a change request, in words, for the audit log.
type Outcome = Result<String, String>;

/// Why a running attempt is being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    Cancel,
    Shutdown,
}

/// A task whose attempt is running (or about to be launched).
struct Running {
    attempt: u32,
    stop: Option<StopReason>,
    /// The node it runs on.
    node: NodeName,
    /// The group it counts in.
    group: Arc<str>,
    /// Its standard input was closed (`orch send --eof`): no more input is taken.
    input_closed: bool,
}

/// Where the engine is in its life.
enum Lifecycle {
    /// Starting tasks.
    Serving,
    /// Asked to stop: starts nothing, waits for the running attempts to end.
    Stopping(Vec<oneshot::Sender<()>>),
    /// Nothing runs; the stop has been answered.
    Stopped,
}

/// Every live task's and every workflow's in-memory state. Owned by the engine's task;
/// nothing else touches it.
pub struct EngineState {
    /// The tasks held in full (see `live`).
    tasks: HashMap<TaskId, Task>,
    /// Queued tasks outside workflows held by their priority only; their records are in
    /// the store.
    cold: HashMap<TaskId, i32>,
    /// The store's records of the tasks not held in full.
    records: Box<dyn Records>,
    /// The steps handed over whose tasks are let go of once they are durable.
    settling: live::Settling,
    ready: ReadyQueue,
    dependants: HashMap<TaskId, Vec<TaskId>>,
    running: HashMap<TaskId, Running>,
    cancel_waiters: HashMap<TaskId, Vec<Reply<Task>>>,
    workflows: HashMap<WorkflowId, Workflow>,
    /// How many tasks of each workflow run now.
    workflow_running: HashMap<WorkflowId, usize>,
    /// Ready tasks held back by their workflow's parallel limit.
    deferred: HashMap<WorkflowId, ReadyQueue>,
    /// The queue's controls: whether it is paused, and the groups.
    controls: QueueControls,
    /// How many tasks of each group run now.
    group_running: HashMap<Arc<str>, usize>,
    /// Ready tasks held back by their group (paused, or at its limit).
    held_back: groups::HeldBack,
    /// The schedules.
    schedules: schedules::Schedules,
    /// The notifiers.
    notifiers: notify::Notifiers,
    /// Workflows whose tasks changed since they were last looked at.
    touched_workflows: BTreeSet<WorkflowId>,
    /// Running tasks whose progress changed since it was last written: only the latest
    /// value of each is written, once per commit (see `flush_progress`).
    progress_dirty: BTreeSet<TaskId>,
    /// A batch of progress values is being committed.
    progress_in_flight: bool,
    /// Whether maps were shrunk since the driver last asked (see `live::compact`).
    compacted: bool,
    /// The nodes attempts run on, and their slots.
    nodes: Nodes,
    /// Queued tasks no node could take when their turn came (by queue order), with the
    /// labels each requires; looked at again when a slot frees or the nodes change.
    unplaced: BTreeMap<(std::cmp::Reverse<i32>, TaskId), Vec<String>>,
    /// A slot freed or the nodes changed since the waiting tasks were last looked at.
    unplaced_changed: bool,
    next_id: TaskId,
    next_seq: u64,
    lifecycle: Lifecycle,
    /// The time of the input being handled.
    now: DateTime<Utc>,
    /// What this turn changed and must do.
    step: Step,
}

impl EngineState {
    /// An engine with nothing in it, whose next event has sequence number `next_seq`.
    fn empty(
        records: Box<dyn Records>,
        nodes: Nodes,
        next_seq: u64,
        now: DateTime<Utc>,
    ) -> EngineState {
        EngineState {
            tasks: HashMap::new(),
            cold: HashMap::new(),
            records,
            settling: live::Settling::default(),
            ready: ReadyQueue::default(),
            dependants: HashMap::new(),
            running: HashMap::new(),
            cancel_waiters: HashMap::new(),
            workflows: HashMap::new(),
            workflow_running: HashMap::new(),
            deferred: HashMap::new(),
            controls: QueueControls::default(),
            group_running: HashMap::new(),
            held_back: HashMap::new(),
            schedules: schedules::Schedules::default(),
            notifiers: notify::Notifiers::new(),
            touched_workflows: BTreeSet::new(),
            progress_dirty: BTreeSet::new(),
            progress_in_flight: false,
            compacted: false,
            nodes,
            unplaced: BTreeMap::new(),
            unplaced_changed: false,
            next_id: 1,
            next_seq,
            lifecycle: Lifecycle::Serving,
            now,
            step: Step::default(),
        }
    }

    /// Changes memory for `input`, received at `now`, and adds what it writes and does to
    /// the current step.
    pub fn handle(&mut self, input: Input, now: DateTime<Utc>) {
        self.now = now;
        match input {
            Input::Request(command) => self.request(command),
            Input::Report(Report { id, attempt, kind }) => match kind {
                ReportKind::Exited(outcome) => self.exited(id, attempt, outcome),
                ReportKind::NotStarted(reason) => self.not_started(id, attempt, reason),
                ReportKind::Progress(progress) => self.progress(id, attempt, progress),
            },
            Input::RetryDue { id, next_attempt } => self.retry_due(id, next_attempt),
            Input::ProgressCommitted => self.progress_in_flight = false,
            Input::Committed { step } => self.committed(step),
            Input::Nodes { offers, holding } => self.nodes_changed(offers, &holding),
            Input::ScheduleDue { name, slot } => self.schedule_due(name, slot),
        }
    }

    /// Ends a turn (after every waiting input was handled): moves the workflows on,
    /// starts queued tasks while slots are free, adds the latest progress, answers a
    /// finished shutdown, and returns the step to commit and carry out.
    pub fn end_turn(&mut self, now: DateTime<Utc>) -> Step {
        self.now = now;
        self.advance_workflows();
        self.dispatch();
        self.flush_progress();
        self.queue_notifications();
        if let Lifecycle::Stopping(waiters) = &mut self.lifecycle
            && self.running.is_empty()
        {
            self.step.effects.stopped = std::mem::take(waiters);
            self.lifecycle = Lifecycle::Stopped;
        }
        self.step.effects.settled = self.close_step();
        std::mem::take(&mut self.step)
    }

    /// True once a shutdown has been answered: nothing runs and nothing will start.
    pub fn is_stopped(&self) -> bool {
        matches!(self.lifecycle, Lifecycle::Stopped)
    }

    fn request(&mut self, command: Command) {
        match command {
            Command::Submit {
                actor,
                specs,
                stashed,
                reply,
            } => {
                let mut params = crate::audit::submitted_params(&specs);
                if stashed {
                    params["stashed"] = true.into();
                }
                let outcome = self.submit(specs, stashed, reply);
                self.audit(actor, "submit", params, outcome);
            }
            Command::ChangeTask {
                actor,
                id,
                change,
                reply,
            } => {
                let params = crate::audit::task_change_params(id, &change);
                let outcome = self.change_task(id, change, reply);
                self.audit(actor, "task_change", params, outcome);
            }
            Command::SubmitWorkflow {
                actor,
                draft,
                reply,
            } => {
                let params = draft.request.clone();
                let action = match draft.restart_of {
                    Some(_) => "workflow_restart",
                    None => "workflow_submit",
                };
                let outcome = self.submit_workflow(*draft, reply);
                self.audit(actor, action, params, outcome);
            }
            Command::CancelWorkflow { actor, id, reply } => {
                let outcome = self.cancel_workflow(id, reply);
                self.audit_on(actor, "workflow_cancel", id, outcome);
            }
            Command::RollbackWorkflow { actor, id, reply } => {
                let outcome = self.rollback_workflow(id, reply);
                self.audit_on(actor, "workflow_rollback", id, outcome);
            }
            Command::SaveEnv { env, audit, reply } => self.save_env(*env, audit, reply),
            Command::Clean { actor, rule, reply } => self.clean(actor, rule, reply),
            Command::TrimEvents {
                actor,
                through,
                params,
                reply,
            } => {
                self.step.batch.events_removed_through = Some(through);
                let outcome = Ok(format!("removed the events up to {through}"));
                self.audit(actor, "events_trim", params, outcome);
                self.answer(reply, Ok(()));
            }
            Command::Audit { record, reply } => {
                self.step.batch.audit.push(record);
                self.answer(reply, Ok(()));
            }
            Command::Cancel { actor, id, reply } => {
                let outcome = self.cancel(id, reply);
                self.audit_on(actor, "cancel", id, outcome);
            }
            Command::Retry { actor, id, reply } => {
                let outcome = self.retry(id, reply);
                self.audit_on(actor, "retry", id, outcome);
            }
            Command::ChangeQueue {
                actor,
                change,
                reply,
            } => {
                let params = serde_json::to_value(&change).unwrap_or_default();
                let outcome = self.change_queue(change, reply);
                self.audit(actor, "queue_change", params, outcome);
            }
            Command::AddSchedule {
                actor,
                spec,
                owner_host,
                reply,
            } => {
                let params = crate::audit::schedule_params(&spec);
                let outcome = self.add_schedule(actor.clone(), spec, owner_host, reply);
                self.audit(actor, "schedule_add", params, outcome);
            }
            Command::ChangeSchedule {
                actor,
                name,
                change,
                reply,
            } => {
                let params = serde_json::json!({ "name": name, "change": change });
                let outcome = self.change_schedule(&name, change, reply);
                self.audit(actor, "schedule_change", params, outcome);
            }
            Command::FireSchedule { name, slot, draft } => self.fire_schedule(name, slot, draft),
            Command::AddNotifier { actor, spec, reply } => {
                let params = crate::audit::notifier_params(&spec);
                let outcome = self.add_notifier(actor.clone(), spec, reply);
                self.audit(actor, "notify_add", params, outcome);
            }
            Command::ChangeNotifier {
                actor,
                name,
                change,
                reply,
            } => {
                let params = serde_json::json!({ "name": name, "change": change });
                let outcome = self.change_notifier(&name, change, reply);
                self.audit(actor, "notify_change", params, outcome);
            }
            Command::Delivered {
                entry,
                result,
                reply,
            } => {
                self.delivered(*entry, result);
                self.answer(reply, Ok(()));
            }
            Command::PauseTask { actor, id, reply } => {
                let outcome = self.pause_task(id, reply);
                self.audit_on(actor, "pause", id, outcome);
            }
            Command::ResumeTask { actor, id, reply } => {
                let outcome = self.resume_task(id, reply);
                self.audit_on(actor, "resume", id, outcome);
            }
            Command::SignalTask {
                actor,
                id,
                signal,
                reply,
            } => self.signal_task(actor, id, signal, reply),
            Command::SendInput {
                actor,
                id,
                data,
                eof,
                reply,
            } => self.send_input(actor, id, data, eof, reply),
            Command::Shutdown {
                done,
                leave_running,
            } => self.begin_shutdown(done, leave_running),
        }
    }

    /// Records a test environment (assigning an id to a new one) and its audit record,
    /// with one `env` event carrying its state.
    fn save_env(&mut self, mut env: TestEnv, audit: Option<AuditRecord>, reply: Reply<TestEnv>) {
        if env.id == 0 {
            env.id = self.next_id;
            self.next_id += 1;
        }
        let state = env.state.clone();
        self.push_event(env.id, None, EventKind::Env { state });
        self.step.batch.test_envs.push(env.clone());
        self.step.batch.audit.extend(audit);
        self.answer(reply, Ok(env));
    }

    /// Stops starting tasks and stops the running ones (they are requeued as they end);
    /// with `leave_running`, leaves them running and is done at once.
    fn begin_shutdown(&mut self, done: oneshot::Sender<()>, leave_running: bool) {
        if leave_running {
            self.step.effects.stopped.push(done);
            self.lifecycle = Lifecycle::Stopped;
            return;
        }
        match &mut self.lifecycle {
            Lifecycle::Stopping(waiters) => waiters.push(done),
            _ => self.lifecycle = Lifecycle::Stopping(vec![done]),
        }
        let running: Vec<TaskId> = self.running.keys().copied().collect();
        for id in running {
            // A cancel already under way stays a cancel.
            self.stop(id, StopReason::Shutdown);
        }
    }

    /// Stops `id`'s running attempt; a cancel wins over a shutdown (the task must not be
    /// requeued), while a shutdown leaves a cancel under way as it is.
    fn stop(&mut self, id: TaskId, reason: StopReason) {
        let Some(running) = self.running.get_mut(&id) else {
            return;
        };
        match reason {
            StopReason::Cancel => running.stop = Some(reason),
            StopReason::Shutdown => _ = running.stop.get_or_insert(reason),
        }
        self.step.effects.stops.push(id);
    }

    /// Records a change request in the audit log, in the same transaction as the change.
    fn audit(
        &mut self,
        actor: Actor,
        action: &'static str,
        params: serde_json::Value,
        outcome: Outcome,
    ) {
        let record = AuditRecord::new(actor, action, params, outcome);
        self.step.batch.audit.push(record);
    }

    /// [`Self::audit`] for a request about one task or workflow.
    fn audit_on(&mut self, actor: Actor, action: &'static str, id: u64, outcome: Outcome) {
        self.audit(actor, action, serde_json::json!({ "id": id }), outcome);
    }

    /// Answers `reply` with `result` once this step is durable.
    fn answer<T: Answerable>(&mut self, reply: Reply<T>, result: Result<T, ErrorReply>) {
        self.step.effects.answers.push(T::answer(reply, result));
    }

    /// Refuses a request; returns the outcome for the audit log. The error was decided
    /// from the in-memory state, so it is answered once that state (and the request's
    /// audit entry) is durable: a client never sees, say, "already succeeded" before it is
    /// true on disk.
    fn refuse<T: Answerable>(&mut self, reply: Reply<T>, error: ErrorReply) -> Outcome {
        let outcome = Err(error.message.clone());
        self.answer(reply, Err(error));
        outcome
    }

    /// Records a state change of `id`: in memory, in the step's batch, and as an event.
    fn transition(&mut self, id: TaskId, state: TaskState, kind: EventKind) {
        if self.progress_dirty.remove(&id) {
            // The latest progress comes before the change (which writes it with the task).
            self.log_progress(id);
        }
        let task = self.tasks.get_mut(&id).expect("transition of a known task");
        let previous = Some(task.state.status());
        let now_final = state.status().is_final();
        task.state = state;
        let write = TaskWrite {
            task: task.clone(),
            previous,
            reindex: None,
        };
        self.step.batch.tasks.push(write);
        self.log_event(id, kind);
        if now_final {
            self.note_step_finished(id);
        }
    }

    fn log_event(&mut self, task: TaskId, kind: EventKind) {
        let workflow = self
            .tasks
            .get(&task)
            .and_then(|t| t.spec.workflow.as_ref())
            .map(|s| s.workflow);
        self.push_event(task, workflow, kind);
    }

    /// Logs an event of workflow `id` itself.
    fn log_workflow_event(&mut self, id: WorkflowId, kind: EventKind) {
        self.push_event(id, Some(id), kind);
    }

    fn push_event(&mut self, task: TaskId, workflow: Option<WorkflowId>, kind: EventKind) {
        let event = Event {
            seq: self.next_seq,
            at: self.now,
            task,
            workflow,
            kind,
        };
        self.next_seq += 1;
        self.step.batch.events.push(event);
    }

    /// The time `delay` from now (delays are bounded at submission, so this cannot
    /// overflow in practice; it saturates if it would).
    fn after(&self, delay: Duration) -> DateTime<Utc> {
        chrono::Duration::from_std(delay)
            .ok()
            .and_then(|d| self.now.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    /// A copy of task `id` (which must exist), for answers.
    fn copy_of(&self, id: TaskId) -> Task {
        self.tasks[&id].clone()
    }
}

/// A refusal of a request about task or workflow `id` in a state that does not allow it.
fn conflict(message: String) -> ErrorReply {
    ErrorReply::field(orch_protocol::ErrorKind::Conflict, "id", message)
}

/// `ids` without repeats, in the order of their first appearance.
fn unique(ids: &[TaskId]) -> Vec<TaskId> {
    let mut seen = HashSet::new();
    ids.iter().copied().filter(|id| seen.insert(*id)).collect()
}
