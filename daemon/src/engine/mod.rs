//! The engine: one task that owns the queue and every task's in-memory state.
//!
//! Each change is made in memory, written to a [`WriteBatch`] and handed to the group
//! committer; its effects (replies, process launches, retry timers, published events)
//! run only once the batch is durable. Because batches commit in order, a launch that
//! follows a success can never be acted on before that success is durable.

mod backoff;
mod clean;
mod queue;
mod recovery;
mod transitions;
mod workflows;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use orch_protocol::{
    Actor, AttemptOutcome, CleanFilter, ErrorReply, Event, EventKind, Progress, Task, TaskId,
    TaskSpec, TaskState, TestEnv, Workflow, WorkflowId, WorkflowSummary,
};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::audit::AuditRecord;
use crate::events::EventBus;
use crate::runner::{Launch, Runner};
use crate::store::{GroupCommitter, Snapshot, StoreError, TaskWrite, WriteBatch};
use crate::workflows::Draft;
use queue::ReadyQueue;

/// A reply channel for a request that changes tasks.
pub type Reply<T> = oneshot::Sender<Result<T, ErrorReply>>;

/// What came of a change request, in words, for the audit log.
type Outcome = Result<String, String>;

/// Messages to the engine task.
pub enum Command {
    /// Accept new tasks (all or none).
    Submit {
        /// Who asked.
        actor: Actor,
        /// The tasks.
        specs: Vec<TaskSpec>,
        /// Answered with the created tasks once they are durable.
        reply: Reply<Vec<Task>>,
    },
    /// Cancel a task.
    Cancel {
        /// Who asked.
        actor: Actor,
        /// Which.
        id: TaskId,
        /// Answered once the cancellation is durable.
        reply: Reply<Task>,
    },
    /// Queue a failed or cancelled task again.
    Retry {
        /// Who asked.
        actor: Actor,
        /// Which.
        id: TaskId,
        /// Answered once the task is queued durably.
        reply: Reply<Task>,
    },
    /// Create a checked workflow and its step tasks.
    SubmitWorkflow {
        /// Who asked.
        actor: Actor,
        /// The workflow, expanded and checked.
        draft: Box<Draft>,
        /// Answered with the created workflow once it is durable.
        reply: Reply<WorkflowSummary>,
    },
    /// Cancel a workflow's unfinished tasks.
    CancelWorkflow {
        /// Who asked.
        actor: Actor,
        /// Which.
        id: WorkflowId,
        /// Answered once the cancellation is durable.
        reply: Reply<WorkflowSummary>,
    },
    /// Compensate a finished workflow's completed steps.
    RollbackWorkflow {
        /// Who asked.
        actor: Actor,
        /// Which.
        id: WorkflowId,
        /// Answered once the rollback has durably started.
        reply: Reply<WorkflowSummary>,
    },
    /// Record a test environment (a new one, with id 0, gets the next id), with the audit
    /// record of the request that changed it.
    SaveEnv {
        /// The record.
        env: Box<TestEnv>,
        /// The change request, for the audit log.
        audit: Option<AuditRecord>,
        /// Answered with the record (and its id) once it is durable.
        reply: Reply<TestEnv>,
    },
    /// Remove finished tasks.
    Clean {
        /// Who asked.
        actor: Actor,
        /// Which tasks.
        filter: CleanFilter,
        /// Answered with the removed ids once the removal is durable.
        reply: Reply<Vec<TaskId>>,
    },
    /// Record a change request handled outside the engine (such as a shutdown) in the
    /// audit log.
    Audit {
        /// The record.
        record: AuditRecord,
        /// Answered once it is durable.
        reply: Reply<()>,
    },
    /// A process ended (sent by the runner).
    Exited {
        /// Which task.
        id: TaskId,
        /// Which attempt.
        attempt: u32,
        /// How it ended.
        outcome: AttemptOutcome,
    },
    /// An attempt could not start for lack of system resources (sent by the runner): it
    /// is not counted, and the task is tried again after a short delay.
    NotStarted {
        /// Which task.
        id: TaskId,
        /// Which attempt.
        attempt: u32,
        /// The system's error.
        reason: String,
    },
    /// The batch carrying the latest progress values is durable: the next ones may go.
    ProgressCommitted,
    /// A task printed a progress line (sent by the runner).
    Progress {
        /// Which task.
        id: TaskId,
        /// Which attempt.
        attempt: u32,
        /// What it reported.
        progress: Progress,
    },
    /// A retry delay passed.
    RetryDue {
        /// Which task.
        id: TaskId,
        /// The attempt the delay was for (a timer of an earlier round is ignored).
        next_attempt: u32,
    },
    /// Stop starting tasks, stop the running ones, requeue them durably, then answer.
    Shutdown {
        /// Answered when nothing runs any more and everything is committed.
        done: oneshot::Sender<()>,
    },
}

/// A cheap handle for sending commands to the engine.
#[derive(Clone)]
pub struct EngineHandle {
    sender: mpsc::UnboundedSender<Command>,
}

impl EngineHandle {
    /// Sends a command and waits for the answer carried by its reply channel.
    pub async fn request<T>(
        &self,
        make: impl FnOnce(Reply<T>) -> Command,
    ) -> Result<T, ErrorReply> {
        let (tx, rx) = oneshot::channel();
        self.sender.send(make(tx)).map_err(|_| stopping())?;
        rx.await.map_err(|_| stopping())?
    }

    /// Asks the engine to stop and waits until it has.
    pub async fn shutdown(&self) {
        let (done, rx) = oneshot::channel();
        if self.sender.send(Command::Shutdown { done }).is_ok() {
            let _ = rx.await;
        }
    }
}

fn stopping() -> ErrorReply {
    ErrorReply::new(
        orch_protocol::ErrorKind::Unavailable,
        "the daemon is shutting down",
    )
}

/// Why a running attempt is being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    Cancel,
    Shutdown,
}

/// A task whose attempt is running (or about to be launched).
struct Running {
    attempt: u32,
    token: CancellationToken,
    stop: Option<StopReason>,
}

/// A retry timer: task, attempt it is for, delay.
type Timer = (TaskId, u32, Duration);

/// Work to do once a batch is durable (or has failed).
type AfterCommit = Box<dyn FnOnce(Result<(), &StoreError>) + Send>;

/// Changes made in memory and not yet committed, with what to do once they are.
#[derive(Default)]
struct Pending {
    batch: WriteBatch,
    launches: Vec<Launch>,
    timers: Vec<Timer>,
    after_commit: Vec<AfterCommit>,
}

/// The engine's state. Owned by one task; nothing else touches it.
pub struct Engine {
    tasks: HashMap<TaskId, Task>,
    ready: ReadyQueue,
    dependants: HashMap<TaskId, Vec<TaskId>>,
    running: HashMap<TaskId, Running>,
    cancel_waiters: HashMap<TaskId, Vec<Reply<Task>>>,
    workflows: HashMap<WorkflowId, Workflow>,
    /// How many tasks of each workflow run now.
    workflow_running: HashMap<WorkflowId, usize>,
    /// Ready tasks held back by their workflow's parallel limit.
    deferred: HashMap<WorkflowId, ReadyQueue>,
    /// Workflows whose tasks changed since they were last looked at.
    touched_workflows: BTreeSet<WorkflowId>,
    /// Running tasks whose progress changed since it was last written: only the latest
    /// value of each is written, once per commit (see [`Engine::flush_progress`]).
    progress_dirty: BTreeSet<TaskId>,
    /// A batch of progress values is being committed.
    progress_in_flight: bool,
    parallel_limit: usize,
    next_id: TaskId,
    next_seq: u64,
    committer: GroupCommitter,
    bus: EventBus,
    runner: Runner,
    mailbox: mpsc::UnboundedSender<Command>,
    fatal: CancellationToken,
    shutdown_waiter: Option<oneshot::Sender<()>>,
    pending: Pending,
}

/// What the engine needs from the rest of the daemon.
pub struct EngineParts {
    /// The store's group committer.
    pub committer: GroupCommitter,
    /// Where committed events go.
    pub bus: EventBus,
    /// Starts processes.
    pub runner: Runner,
    /// How many tasks may run at once.
    pub parallel_limit: usize,
    /// Cancelled when the engine cannot go on (the store failed): the daemon stops.
    pub fatal: CancellationToken,
}

impl Engine {
    /// Rebuilds the engine from the store's snapshot, commits the recovery of interrupted
    /// attempts, and starts the engine task. Returns the handle and the task's join handle.
    pub async fn start(
        snapshot: Snapshot,
        parts: EngineParts,
    ) -> Result<(EngineHandle, tokio::task::JoinHandle<()>), StoreError> {
        let (sender, mut inbox) = mpsc::unbounded_channel();
        let mut engine = Engine {
            tasks: HashMap::new(),
            ready: ReadyQueue::default(),
            dependants: HashMap::new(),
            running: HashMap::new(),
            cancel_waiters: HashMap::new(),
            workflows: HashMap::new(),
            workflow_running: HashMap::new(),
            deferred: HashMap::new(),
            touched_workflows: BTreeSet::new(),
            progress_dirty: BTreeSet::new(),
            progress_in_flight: false,
            parallel_limit: parts.parallel_limit.max(1),
            next_id: 1,
            next_seq: snapshot.last_event_seq + 1,
            committer: parts.committer,
            bus: parts.bus,
            runner: parts.runner.with_mailbox(sender.clone()),
            mailbox: sender.clone(),
            fatal: parts.fatal,
            shutdown_waiter: None,
            pending: Pending::default(),
        };
        engine.recover(snapshot);
        let batch = std::mem::take(&mut engine.pending);
        engine.committer.commit(batch.batch).await?;
        engine.schedule_timers(batch.timers);
        let join = tokio::spawn(async move {
            engine.dispatch();
            engine.flush();
            while let Some(command) = inbox.recv().await {
                engine.handle(command);
                // Take everything already waiting before committing, so that one
                // transaction covers as many changes as possible.
                while let Ok(command) = inbox.try_recv() {
                    engine.handle(command);
                }
                engine.advance_workflows();
                engine.dispatch();
                engine.flush();
                if engine.finished_shutdown() {
                    break;
                }
            }
        });
        Ok((EngineHandle { sender }, join))
    }

    fn handle(&mut self, command: Command) {
        match command {
            Command::Submit {
                actor,
                specs,
                reply,
            } => {
                let params = crate::audit::submitted_params(&specs);
                let outcome = self.submit(specs, reply);
                self.audit(actor, "submit", params, outcome);
            }
            Command::SubmitWorkflow {
                actor,
                draft,
                reply,
            } => {
                let params = draft.request.clone();
                let outcome = self.submit_workflow(*draft, reply);
                self.audit(actor, "workflow_submit", params, outcome);
            }
            Command::CancelWorkflow { actor, id, reply } => {
                let outcome = self.cancel_workflow(id, reply);
                self.audit(
                    actor,
                    "workflow_cancel",
                    serde_json::json!({ "id": id }),
                    outcome,
                );
            }
            Command::RollbackWorkflow { actor, id, reply } => {
                let outcome = self.rollback_workflow(id, reply);
                self.audit(
                    actor,
                    "workflow_rollback",
                    serde_json::json!({ "id": id }),
                    outcome,
                );
            }
            Command::SaveEnv { env, audit, reply } => self.save_env(*env, audit, reply),
            Command::Clean {
                actor,
                filter,
                reply,
            } => {
                let params = serde_json::to_value(&filter).expect("filters serialize");
                let outcome = self.clean(filter, reply);
                self.audit(actor, "clean", params, outcome);
            }
            Command::Audit { record, reply } => {
                self.pending.batch.audit.push(record);
                self.after_commit(move |result| {
                    let _ = reply.send(result.map_err(|e| {
                        ErrorReply::new(orch_protocol::ErrorKind::Internal, e.to_string())
                    }));
                });
            }
            Command::Cancel { actor, id, reply } => {
                let outcome = self.cancel(id, reply);
                self.audit(actor, "cancel", serde_json::json!({ "id": id }), outcome);
            }
            Command::Retry { actor, id, reply } => {
                let outcome = self.retry(id, reply);
                self.audit(actor, "retry", serde_json::json!({ "id": id }), outcome);
            }
            Command::Exited {
                id,
                attempt,
                outcome,
            } => self.exited(id, attempt, outcome),
            Command::Progress {
                id,
                attempt,
                progress,
            } => self.progress(id, attempt, progress),
            Command::ProgressCommitted => self.progress_in_flight = false,
            Command::NotStarted {
                id,
                attempt,
                reason,
            } => self.not_started(id, attempt, reason),
            Command::RetryDue { id, next_attempt } => self.retry_due(id, next_attempt),
            Command::Shutdown { done } => self.begin_shutdown(done),
        }
    }

    /// Records a test environment (assigning an id to a new one) and its audit record.
    fn save_env(&mut self, mut env: TestEnv, audit: Option<AuditRecord>, reply: Reply<TestEnv>) {
        if env.id == 0 {
            env.id = self.next_id;
            self.next_id += 1;
        }
        self.pending.batch.test_envs.push(env.clone());
        self.pending.batch.audit.extend(audit);
        self.after_commit(move |result| {
            let _ = reply.send(result.map(|()| env).map_err(transitions::internal));
        });
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
        self.pending.batch.audit.push(record);
    }

    /// Records a state change of `id`: in memory, in the pending batch, and as an event.
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
        };
        self.pending.batch.tasks.push(write);
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
            at: Utc::now(),
            task,
            workflow,
            kind,
        };
        self.next_seq += 1;
        self.pending.batch.events.push(event);
    }

    /// Runs `then` once everything changed so far is durable.
    fn after_commit(&mut self, then: impl FnOnce(Result<(), &StoreError>) + Send + 'static) {
        self.pending.after_commit.push(Box::new(then));
    }

    /// The progress event of `id`'s current progress.
    fn log_progress(&mut self, id: TaskId) {
        if let Some(progress) = self.tasks.get(&id).and_then(|t| t.progress.clone()) {
            self.log_event(id, EventKind::Progress { progress });
        }
    }

    /// Adds the latest progress of each task whose progress changed to the pending batch,
    /// unless the previous such batch is not durable yet: however fast tasks print
    /// progress, each task record is written at most once per commit.
    fn flush_progress(&mut self) {
        if self.progress_in_flight || self.progress_dirty.is_empty() {
            return;
        }
        for id in std::mem::take(&mut self.progress_dirty) {
            let Some(task) = self.tasks.get(&id) else {
                continue;
            };
            if !matches!(task.state, TaskState::Running { .. }) {
                continue;
            }
            let write = TaskWrite {
                task: task.clone(),
                previous: Some(orch_protocol::TaskStatus::Running),
            };
            self.pending.batch.tasks.push(write);
            self.log_progress(id);
        }
        self.progress_in_flight = true;
        let mailbox = self.mailbox.clone();
        self.after_commit(move |_| {
            let _ = mailbox.send(Command::ProgressCommitted);
        });
    }

    /// Hands the pending changes to the committer, with their effects.
    fn flush(&mut self) {
        self.flush_progress();
        let pending = std::mem::take(&mut self.pending);
        if pending.batch.is_empty() && pending.after_commit.is_empty() {
            return;
        }
        let events = pending.batch.events.clone();
        let bus = self.bus.clone();
        let runner = self.runner.clone();
        let mailbox = self.mailbox.clone();
        let fatal = self.fatal.clone();
        let runtime = tokio::runtime::Handle::current();
        self.committer.submit(pending.batch, move |result| {
            if let Err(e) = &result {
                tracing::error!(error = %e, "cannot commit state; stopping the daemon");
                fatal.cancel();
            } else {
                bus.publish(events);
                for launch in pending.launches {
                    runner.launch(&runtime, launch);
                }
                for timer in pending.timers {
                    schedule_retry(&runtime, mailbox.clone(), timer);
                }
            }
            for then in pending.after_commit {
                then(result.as_ref().map(|_| ()));
            }
        });
    }

    fn schedule_timers(&self, timers: Vec<Timer>) {
        let runtime = tokio::runtime::Handle::current();
        for timer in timers {
            schedule_retry(&runtime, self.mailbox.clone(), timer);
        }
    }

    /// Starts queued tasks while slots are free.
    fn dispatch(&mut self) {
        while self.shutdown_waiter.is_none() && self.running.len() < self.parallel_limit {
            let Some(id) = self.ready.pop() else { break };
            let Some(task) = self.tasks.get_mut(&id) else {
                continue;
            };
            if !matches!(task.state, TaskState::Queued { .. }) {
                continue; // a stale entry: cancelled or already started
            }
            if !self.take_workflow_slot(id) {
                continue; // its workflow is at its limit: deferred until a slot frees
            }
            let task = self.tasks.get_mut(&id).expect("checked above");
            let attempt = task.attempts.len() as u32 + 1;
            let started_at = Utc::now();
            task.attempts.push(orch_protocol::Attempt {
                number: attempt,
                started_at,
                finished_at: None,
                outcome: None,
            });
            task.progress = None;
            let spec = task.spec.clone();
            self.transition(
                id,
                TaskState::Running {
                    attempt,
                    started_at,
                },
                EventKind::Started { attempt },
            );
            let token = CancellationToken::new();
            self.running.insert(
                id,
                Running {
                    attempt,
                    token: token.clone(),
                    stop: None,
                },
            );
            self.pending.launches.push(Launch {
                id,
                attempt,
                spec,
                token,
            });
        }
    }

    fn finished_shutdown(&mut self) -> bool {
        if self.shutdown_waiter.is_none() || !self.running.is_empty() {
            return false;
        }
        let done = self.shutdown_waiter.take().expect("checked above");
        self.after_commit(move |_| {
            let _ = done.send(());
        });
        self.flush();
        true
    }

    fn begin_shutdown(&mut self, done: oneshot::Sender<()>) {
        self.shutdown_waiter = Some(done);
        for running in self.running.values_mut() {
            // A cancel already under way stays a cancel.
            running.stop.get_or_insert(StopReason::Shutdown);
            running.token.cancel();
        }
    }
}

fn schedule_retry(
    runtime: &tokio::runtime::Handle,
    mailbox: mpsc::UnboundedSender<Command>,
    (id, next_attempt, delay): Timer,
) {
    runtime.spawn(async move {
        tokio::time::sleep(delay).await;
        let _ = mailbox.send(Command::RetryDue { id, next_attempt });
    });
}

/// The time `delay` from now (delays are bounded at submission, so this cannot overflow
/// in practice; it saturates if it would).
fn after(delay: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(delay)
        .ok()
        .and_then(|d| Utc::now().checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// `ids` without repeats, in the order of their first appearance.
fn unique(ids: &[TaskId]) -> Vec<TaskId> {
    let mut seen = HashSet::new();
    ids.iter().copied().filter(|id| seen.insert(*id)).collect()
}

/// A copy of task `id` (which must exist), for replies.
fn snapshot_of(tasks: &HashMap<TaskId, Task>, id: TaskId) -> Task {
    tasks[&id].clone()
}
