//! The engine: the queue and every task's and workflow's in-memory state, owned by one
//! task.
//!
//! It has two halves:
//! - [`state`]: a state machine without I/O, clock or runtime. Each [`Input`] (a request,
//!   a runner [`Report`], a retry timer) changes memory and adds to the current
//!   [`Step`](effects::Step): the [`WriteBatch`](crate::store::WriteBatch) to commit and the
//!   [`Effects`](effects::Effects) to carry out once it is durable (attempts to launch or
//!   stop, retry timers, answers, logs to delete, the events in the batch to publish).
//!   Time is passed in. Its unit tests (`state/tests/`) run in milliseconds.
//! - [`driver`]: the tokio task that feeds it. It drains every waiting input, ends the
//!   turn, hands the step's batch to the group committer, and [`executor`] carries out
//!   the effects only once the batch is durable. Because batches commit in order, a launch that
//!   follows a success can never be acted on before that success is durable.
//!
//! [`validate`] checks a task spec on its own (dependencies are the state's business).

mod driver;
mod effects;
mod executor;
mod records;
mod state;
mod validate;

pub use driver::{Engine, EngineParts, EngineStartError, Placement};
pub use executor::Expand;
pub use state::retention::{self, Keep, Rule, Selection};
pub use state::{NodeName, NodeOffer, Nodes};

use std::collections::HashSet;

use orch_protocol::{
    Actor, ErrorReply, Notifier, NotifierChange, NotifierSpec, OutboxEntry, QueueChange, QueueView,
    Schedule, ScheduleChange, ScheduleSpec, Task, TaskChange, TaskId, TaskSignal, TaskSpec,
    TestEnv, WorkflowId, WorkflowSummary,
};
use tokio::sync::{mpsc, oneshot};

use crate::audit::AuditRecord;
use crate::runner::Report;
use crate::workflows::Draft;

/// A reply channel for a request that changes tasks.
pub type Reply<T> = oneshot::Sender<Result<T, ErrorReply>>;

/// Requests to the engine.
pub enum Command {
    /// Accept new tasks (all or none).
    Submit {
        /// Who asked.
        actor: Actor,
        /// The tasks.
        specs: Vec<TaskSpec>,
        /// Submit them stashed (held until enqueued).
        stashed: bool,
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
    /// Stash, enqueue or edit a task that has not started.
    ChangeTask {
        /// Who asked.
        actor: Actor,
        /// Which.
        id: TaskId,
        /// The change.
        change: TaskChange,
        /// Answered with the task once the change is durable.
        reply: Reply<Task>,
    },
    /// Change the queue's controls (groups, limits, pauses).
    ChangeQueue {
        /// Who asked.
        actor: Actor,
        /// The change.
        change: QueueChange,
        /// Answered with the controls once the change is durable.
        reply: Reply<QueueView>,
    },
    /// Create a schedule (a workflow's was checked by expanding it).
    AddSchedule {
        /// Who asked.
        actor: Actor,
        /// The schedule.
        spec: ScheduleSpec,
        /// The host where its creator may name any workspace, if they may.
        owner_host: Option<String>,
        /// Answered with the schedule once it is durable.
        reply: Reply<Schedule>,
    },
    /// Pause, resume or remove a schedule.
    ChangeSchedule {
        /// Who asked.
        actor: Actor,
        /// Which.
        name: String,
        /// The change.
        change: ScheduleChange,
        /// Answered with the schedule once the change is durable.
        reply: Reply<Schedule>,
    },
    /// The driver expanded the workflow of a schedule's time (or could not).
    FireSchedule {
        /// The schedule.
        name: String,
        /// The time it runs for.
        slot: chrono::DateTime<chrono::Utc>,
        /// The workflow, or why it could not be expanded.
        draft: Result<Box<Draft>, String>,
    },
    /// Create a notifier.
    AddNotifier {
        /// Who asked.
        actor: Actor,
        /// The notifier (its target checked).
        spec: NotifierSpec,
        /// Answered with the notifier once it is durable.
        reply: Reply<Notifier>,
    },
    /// Remove a notifier, or queue a test notification for it.
    ChangeNotifier {
        /// Who asked.
        actor: Actor,
        /// Which.
        name: String,
        /// The change.
        change: NotifierChange,
        /// Answered with the notifier once the change is durable.
        reply: Reply<Notifier>,
    },
    /// The deliverer tried a notification.
    Delivered {
        /// The notification, as read from the outbox.
        entry: Box<OutboxEntry>,
        /// Whether it was delivered, or why not.
        result: Result<(), String>,
        /// Answered once the try's end is durable (the entry is not read again before).
        reply: Reply<()>,
    },
    /// Pause a running task.
    PauseTask {
        /// Who asked.
        actor: Actor,
        /// Which.
        id: TaskId,
        /// Answered once the pause is durable.
        reply: Reply<Task>,
    },
    /// Resume a paused task.
    ResumeTask {
        /// Who asked.
        actor: Actor,
        /// Which.
        id: TaskId,
        /// Answered once the resume is durable.
        reply: Reply<Task>,
    },
    /// Write to a running task's standard input.
    SendInput {
        /// Who asked.
        actor: Actor,
        /// Which.
        id: TaskId,
        /// What to write.
        data: String,
        /// Close the standard input after it.
        eof: bool,
        /// Answered once the request is durable (audited), before the input is written.
        reply: Reply<Task>,
    },
    /// Send a signal to a running task's processes.
    SignalTask {
        /// Who asked.
        actor: Actor,
        /// Which.
        id: TaskId,
        /// The signal.
        signal: TaskSignal,
        /// Answered once the request is durable (audited), before the signal goes.
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
    /// Remove finished tasks and workflows.
    Clean {
        /// Who asked.
        actor: Actor,
        /// What to remove.
        rule: Rule,
        /// Answered with what was removed once the removal is durable.
        reply: Reply<Selection>,
    },
    /// Remove the logged events up to `through` (the event retention).
    TrimEvents {
        /// Who asked (the daemon).
        actor: Actor,
        /// The last event removed.
        through: u64,
        /// The retention applied, for the audit log.
        params: serde_json::Value,
        /// Answered once the removal is durable.
        reply: Reply<()>,
    },
    /// Record a change request handled outside the engine (such as a shutdown) in the
    /// audit log.
    Audit {
        /// The record.
        record: AuditRecord,
        /// Answered once it is durable.
        reply: Reply<()>,
    },
    /// Stop starting tasks, stop the running ones (unless `leave_running`), requeue them
    /// durably, then answer.
    Shutdown {
        /// Answered when nothing runs any more (or, leaving them running, at once) and
        /// everything is committed.
        done: oneshot::Sender<()>,
        /// Running attempts go on under the supervisor, for the next daemon.
        leave_running: bool,
    },
}

/// What the engine's state machine is fed.
pub(crate) enum Input {
    /// A request.
    Request(Command),
    /// What the runner says about an attempt.
    Report(Report),
    /// A retry delay passed.
    RetryDue {
        /// Which task.
        id: TaskId,
        /// The attempt the delay was for (a timer of an earlier round is ignored).
        next_attempt: u32,
    },
    /// The batch carrying the latest progress values is durable: the next ones may go.
    ProgressCommitted,
    /// Every step up to this one is durable: the tasks they changed may leave memory.
    Committed {
        /// The step's number.
        step: u64,
    },
    /// A schedule's time came.
    ScheduleDue {
        /// The schedule.
        name: String,
        /// The time.
        slot: chrono::DateTime<chrono::Utc>,
    },
    /// The nodes of the cluster now: those that take attempts, and those that may still
    /// run some (the attempts of any other node are gone: interrupted).
    Nodes {
        /// The live nodes, with their capacity and labels.
        offers: Vec<NodeOffer>,
        /// The nodes whose attempts may still run (the live ones, and those whose
        /// fence has not run out).
        holding: HashSet<NodeName>,
    },
}

/// A cheap handle for sending commands to the engine.
#[derive(Clone)]
pub struct EngineHandle {
    sender: mpsc::UnboundedSender<Input>,
}

impl EngineHandle {
    /// A handle to no engine (a standby's, whose operations never reach it): every
    /// request is refused as unavailable.
    pub fn detached() -> EngineHandle {
        let (sender, _) = mpsc::unbounded_channel();
        EngineHandle { sender }
    }

    /// Sends a command and waits for the answer carried by its reply channel.
    pub async fn request<T>(
        &self,
        make: impl FnOnce(Reply<T>) -> Command,
    ) -> Result<T, ErrorReply> {
        let (tx, rx) = oneshot::channel();
        let input = Input::Request(make(tx));
        self.sender.send(input).map_err(|_| stopping())?;
        rx.await.map_err(|_| stopping())?
    }

    /// Tells the engine what became of an attempt run elsewhere (on a node of the
    /// cluster).
    pub fn report(&self, report: Report) {
        let _ = self.sender.send(Input::Report(report));
    }

    /// Tells the engine which nodes take attempts and which still hold theirs.
    pub fn nodes(&self, offers: Vec<NodeOffer>, holding: HashSet<NodeName>) {
        let _ = self.sender.send(Input::Nodes { offers, holding });
    }

    /// Asks the engine to stop (stopping running attempts unless `leave_running`) and
    /// waits until it has.
    pub async fn shutdown(&self, leave_running: bool) {
        let (done, rx) = oneshot::channel();
        let input = Input::Request(Command::Shutdown {
            done,
            leave_running,
        });
        if self.sender.send(input).is_ok() {
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
