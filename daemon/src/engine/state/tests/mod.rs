//! Unit tests of the engine's state machine: inputs in, steps out, with no runtime, no
//! store and no process. Each test asserts on what a step would commit and do (writes,
//! events, launches, stops, timers, answers) as well as on the state it leaves.
//!
//! The harness plays the driver's part: it hands each input to the state with the test's
//! clock, ends the turn, applies the step's task writes to a store of records in memory
//! (what the engine reads the tasks it does not hold from), delivers the step's answers
//! as after a successful commit (checking that none was sent before), and tells the state
//! that the step is durable (so that it lets go of queued and finished tasks as it does in
//! the daemon).

mod answers;
mod cancels;
mod cleaning;
mod delays;
mod dependencies;
mod environments;
mod groups;
mod live;
mod notifications;
mod nudges;
mod ordering;
mod placement;
mod progress;
mod restarts;
mod retention;
mod retries;
mod rollbacks;
mod schedules;
mod stashing;
mod stopping;
mod workflow_runs;

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, TimeZone, Utc};
use orch_protocol::{
    Actor, AttemptOutcome, ErrorReply, Task, TaskId, TaskSpec, TaskState, TaskStatus, Workflow,
    WorkflowId, WorkflowKind, WorkflowState, WorkflowStatus, WorkflowSummary,
};
use tokio::sync::oneshot;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::{EngineState, NodeName, Nodes, Records};
use crate::engine::effects::Step;
use crate::engine::{Command, Input, Reply};
use crate::runner::{Report, ReportKind};
use crate::store::{Snapshot, StoreError};
use crate::workflows::{Draft, DraftStep};

/// The tests' clock starts here.
fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap()
}

/// Who asks, in every request.
fn actor() -> Actor {
    Actor {
        uid: 1000,
        interface: "socket".into(),
    }
}

/// A command task that does nothing.
fn task() -> TaskSpec {
    TaskSpec::command("true", vec![])
}

/// [`task`] at `priority`.
fn with_priority(priority: i32) -> TaskSpec {
    TaskSpec { priority, ..task() }
}

/// [`task`] with hard dependencies `after`.
fn after(after: &[TaskId]) -> TaskSpec {
    TaskSpec {
        after: after.to_vec(),
        ..task()
    }
}

/// [`task`] with `retries` retries and a fixed nominal backoff of `backoff_ms`.
fn retrying(retries: u32, backoff_ms: u64) -> TaskSpec {
    let mut spec = task();
    spec.retries = retries;
    spec.backoff.initial_ms = backoff_ms;
    spec.backoff.max_ms = backoff_ms.max(spec.backoff.max_ms);
    spec
}

/// An exit with `code`.
fn exited(code: i32) -> ReportKind {
    ReportKind::Exited(AttemptOutcome::Exited { code })
}

/// The end of an attempt stopped by a signal (as a cancel or a shutdown ends it).
fn signalled() -> ReportKind {
    ReportKind::Exited(AttemptOutcome::Signalled { signal: 15 })
}

/// A workflow of `steps`: (id, hard dependencies, has a compensation).
fn draft(steps: &[(&str, &[&str], bool)], parallel_limit: Option<u32>, rollback: bool) -> Draft {
    Draft {
        name: "test".into(),
        kind: WorkflowKind::Batch,
        request: serde_json::json!({}),
        priority: 0,
        parallel_limit,
        group: None,
        rollback_enabled: rollback,
        steps: steps
            .iter()
            .map(|(id, after, compensated)| DraftStep {
                id: id.to_string(),
                description: String::new(),
                spec: task(),
                dependencies: after.iter().map(ToString::to_string).collect(),
                soft_dependencies: Vec::new(),
                rollback: compensated.then(task),
                fill_workflow_id: false,
            })
            .collect(),
        restart_of: None,
    }
}

/// A workflow of two steps: `a`, then `b` (without compensations, rollback or limit).
fn chain() -> Draft {
    draft(&[("a", &[], false), ("b", &["a"], false)], None, false)
}

/// The answer to a request, once its step is committed.
struct Answered<T>(oneshot::Receiver<Result<T, ErrorReply>>);

impl<T> Answered<T> {
    /// The answer given (which must be there).
    fn result(&mut self) -> Result<T, ErrorReply> {
        self.0.try_recv().expect("answered")
    }

    /// The success given.
    fn value(&mut self) -> T {
        self.result()
            .unwrap_or_else(|e| panic!("refused: {}", e.message))
    }

    /// The refusal given.
    fn error(&mut self) -> ErrorReply {
        match self.result() {
            Ok(_) => panic!("accepted"),
            Err(e) => e,
        }
    }

    /// True while no answer has been given.
    fn waiting(&mut self) -> bool {
        matches!(self.0.try_recv(), Err(oneshot::error::TryRecvError::Empty))
    }
}

/// The committed task records, by id: the tests' store.
#[derive(Clone, Default)]
struct Stored(Arc<Mutex<BTreeMap<TaskId, Task>>>);

impl Stored {
    /// Applies a committed batch's task writes and removals.
    fn apply(&self, step: &Step) {
        let mut tasks = self.0.lock().unwrap();
        for write in &step.batch.tasks {
            tasks.insert(write.task.id, write.task.clone());
        }
        for task in &step.batch.removals {
            tasks.remove(&task.id);
        }
    }

    fn get(&self, id: TaskId) -> Option<Task> {
        self.0.lock().unwrap().get(&id).cloned()
    }
}

impl Records for Stored {
    fn task(&self, id: TaskId) -> Option<Task> {
        self.get(id)
    }

    fn each_in(&self, status: TaskStatus, each: &mut dyn FnMut(Task)) {
        let tasks: Vec<Task> = self.0.lock().unwrap().values().cloned().collect();
        for task in tasks.into_iter().filter(|t| t.state.status() == status) {
            each(task);
        }
    }
}

/// The state machine, the tests' store and the tests' clock.
struct Harness {
    state: EngineState,
    stored: Stored,
    now: DateTime<Utc>,
}

impl Harness {
    /// An empty engine that runs `parallel` tasks at once.
    fn new(parallel: usize) -> Harness {
        Harness::on(Nodes::local(parallel, Vec::new()))
    }

    /// An empty engine whose attempts run on `nodes`.
    fn on(nodes: Nodes) -> Harness {
        let stored = Stored::default();
        let records = Box::new(stored.clone());
        let (state, step) =
            EngineState::recover(Snapshot::default(), records, nodes, t0(), &HashMap::new());
        assert!(step.is_empty());
        Harness {
            state,
            stored,
            now: t0(),
        }
    }

    /// The engine rebuilt at `now` from what this one committed, and the recovery's step
    /// (applied to the store and settled).
    fn restarted(&self, parallel: usize, now: DateTime<Utc>) -> (Harness, Step) {
        self.adopting(parallel, now, &HashSet::new())
    }

    /// [`Self::restarted`], with the running attempts of `adopted` taken over.
    fn adopting(
        &self,
        parallel: usize,
        now: DateTime<Utc>,
        adopted: &HashSet<TaskId>,
    ) -> (Harness, Step) {
        let stored = self.stored.clone();
        let records = Box::new(stored.clone());
        let here = NodeName::from("");
        let adopted = adopted.iter().map(|id| (*id, here.clone())).collect();
        let nodes = Nodes::local(parallel, Vec::new());
        let (state, mut step) =
            EngineState::recover(self.snapshot(), records, nodes, now, &adopted);
        let mut h = Harness { state, stored, now };
        h.settle(&mut step);
        (h, step)
    }

    /// What the driver does once `step` is durable: its records are stored, its answers
    /// sent, and the state is told.
    fn settle(&mut self, step: &mut Step) {
        self.stored.apply(step);
        commit(step, Ok(()));
        if let Some(number) = step.effects.settled {
            self.state
                .handle(Input::Committed { step: number }, self.now);
        }
    }

    /// Moves the clock on.
    fn later(&mut self, ms: i64) {
        self.now += chrono::Duration::milliseconds(ms);
    }

    /// One turn with `inputs`; answers are delivered as after a successful commit.
    fn turn(&mut self, inputs: Vec<Input>) -> Step {
        for input in inputs {
            self.state.handle(input, self.now);
        }
        let mut step = self.state.end_turn(self.now);
        self.settle(&mut step);
        step
    }

    /// One turn with a request; its answer must not come before the commit.
    fn ask<T>(&mut self, make: impl FnOnce(Reply<T>) -> Command) -> (Step, Answered<T>) {
        let (reply, receiver) = oneshot::channel();
        let mut answered = Answered(receiver);
        self.state.handle(Input::Request(make(reply)), self.now);
        let mut step = self.state.end_turn(self.now);
        assert!(answered.waiting(), "answered before the commit");
        self.settle(&mut step);
        (step, answered)
    }

    /// Submits tasks (which must be accepted); returns the step and their ids.
    fn submit(&mut self, specs: Vec<TaskSpec>) -> (Step, Vec<TaskId>) {
        let (step, mut answer) = self.ask(|reply| Command::Submit {
            actor: actor(),
            specs,
            stashed: false,
            reply,
        });
        (step, answer.value().iter().map(|t| t.id).collect())
    }

    /// Submits tasks that must be refused; returns the step and the refusal.
    fn submit_refused(&mut self, specs: Vec<TaskSpec>) -> (Step, ErrorReply) {
        let (step, mut answer) = self.ask(|reply| Command::Submit {
            actor: actor(),
            specs,
            stashed: false,
            reply,
        });
        (step, answer.error())
    }

    fn cancel(&mut self, id: TaskId) -> (Step, Answered<Task>) {
        self.ask(|reply| Command::Cancel {
            actor: actor(),
            id,
            reply,
        })
    }

    fn retry(&mut self, id: TaskId) -> (Step, Answered<Task>) {
        self.ask(|reply| Command::Retry {
            actor: actor(),
            id,
            reply,
        })
    }

    /// Submits a workflow (which must be accepted).
    fn submit_workflow(&mut self, draft: Draft) -> (Step, WorkflowSummary) {
        let (step, mut answer) = self.ask(|reply| Command::SubmitWorkflow {
            actor: actor(),
            draft: Box::new(draft),
            reply,
        });
        (step, answer.value())
    }

    /// The runner's report about `id`'s running attempt.
    fn report(&mut self, id: TaskId, kind: ReportKind) -> Step {
        let attempt = self.running_attempt(id);
        self.turn(vec![Input::Report(Report { id, attempt, kind })])
    }

    /// `id`'s running attempt ends with `code`.
    fn exit(&mut self, id: TaskId, code: i32) -> Step {
        self.report(id, exited(code))
    }

    /// The clock moves to the timer's time, and it fires.
    fn fire(&mut self, timer: crate::engine::effects::Timer) -> Step {
        self.now = self.now.max(timer.due);
        let (id, next_attempt) = (timer.id, timer.next_attempt);
        self.turn(vec![Input::RetryDue { id, next_attempt }])
    }

    /// Task `id` as the engine holds it, or else as stored.
    fn task(&self, id: TaskId) -> Task {
        match self.state.tasks.get(&id) {
            Some(task) => task.clone(),
            None => self.stored.get(id).expect("a known task"),
        }
    }

    fn status(&self, id: TaskId) -> TaskStatus {
        self.task(id).state.status()
    }

    fn running_attempt(&self, id: TaskId) -> u32 {
        match self.task(id).state {
            TaskState::Running { attempt, .. } => attempt,
            ref other => panic!("task {id} is not running: {other:?}"),
        }
    }

    fn workflow(&self, id: WorkflowId) -> &Workflow {
        &self.state.workflows[&id]
    }

    /// The task of step `step` of workflow `id`.
    fn step_task(&self, id: WorkflowId, step: &str) -> TaskId {
        let workflow = self.workflow(id);
        workflow.steps.iter().find(|s| s.id == step).unwrap().task
    }

    /// The compensation task of step `step` in rollback round `round`.
    fn compensation(&self, id: WorkflowId, step: &str, round: u32) -> TaskId {
        let workflow = self.workflow(id);
        let found = workflow.rollback_steps.iter();
        found
            .filter(|r| r.step == step && r.round == round)
            .map(|r| r.task)
            .next()
            .unwrap()
    }

    /// What the store's start-up read returns: every workflow and its tasks, the other
    /// blocked, running and retry-waiting tasks, and the queue's ids and priorities.
    fn snapshot(&self) -> Snapshot {
        let stored: Vec<Task> = self.stored.0.lock().unwrap().values().cloned().collect();
        let held =
            |t: &Task| t.spec.workflow.is_some() || crate::store::HELD.contains(&t.state.status());
        let tasks: Vec<Task> = stored.iter().filter(|t| held(t)).cloned().collect();
        let mut queued: Vec<&Task> = stored
            .iter()
            .filter(|t| matches!(t.state, TaskState::Queued { .. }))
            .collect();
        queued.sort_by_key(|t| (-i64::from(t.spec.priority), t.id));
        let queue = queued.iter().map(|t| (t.id, t.spec.priority)).collect();
        let mut workflows: Vec<Workflow> = self.state.workflows.values().cloned().collect();
        workflows.sort_by_key(|w| w.id);
        Snapshot {
            tasks,
            workflows,
            test_envs: Vec::new(),
            queue,
            last_event_seq: self.state.next_seq - 1,
            last_task_id: self.state.next_id - 1,
            migration_underway: false,
            controls: self.state.controls.clone(),
            schedules: self.state.stored_schedules(),
            notifiers: self.state.notifiers.values().cloned().collect(),
        }
    }
}

/// Delivers the step's answers as the driver does after its commit.
fn commit(step: &mut Step, committed: Result<(), &StoreError>) {
    for answer in std::mem::take(&mut step.effects.answers) {
        answer.send(committed);
    }
}

/// What tests read from a step.
impl Step {
    /// The tasks whose attempt it launches.
    fn launched(&self) -> Vec<TaskId> {
        self.effects.launches.iter().map(|s| s.id).collect()
    }

    /// Each task record it writes, with the status written.
    fn written(&self) -> Vec<(TaskId, TaskStatus)> {
        let writes = self.batch.tasks.iter();
        writes.map(|w| (w.task.id, w.task.state.status())).collect()
    }

    /// Each event it logs: the task (or workflow) and the event's type.
    fn events(&self) -> Vec<(TaskId, String)> {
        let events = self.batch.events.iter();
        events.map(|e| (e.task, kind_name(&e.kind))).collect()
    }

    /// The workflow states it writes.
    fn workflow_states(&self) -> Vec<WorkflowStatus> {
        let written = self.batch.workflows.iter();
        written.map(|w| w.state.status()).collect()
    }
}

/// An event's type as logged (`submitted`, `started`, ...).
fn kind_name(kind: &orch_protocol::EventKind) -> String {
    let json = serde_json::to_value(kind).unwrap();
    json["type"].as_str().unwrap().to_string()
}

/// `(id, name)` pairs from borrowed names, for comparing with [`Step::events`].
fn events(list: &[(TaskId, &str)]) -> Vec<(TaskId, String)> {
    list.iter()
        .map(|(id, name)| (*id, name.to_string()))
        .collect()
}
