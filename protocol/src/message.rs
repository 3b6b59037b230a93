//! The handshake and the typed requests and responses.

use serde::{Deserialize, Serialize};

use crate::audit::{AuditCut, AuditEntry, AuditFilter, AuditReport, AuditSegment};
use crate::event::Event;
use crate::extensions::ExtensionsReport;
use crate::filters::{CleanFilter, TaskFilter};
use crate::health::HealthReport;
use crate::notify::{Notifier, NotifierChange, NotifierSpec};
use crate::queue::{QueueChange, QueueView};
use crate::schedule::{Schedule, ScheduleChange, ScheduleSpec, ScheduleView};
use crate::task::{Task, TaskId, TaskSpec};
use crate::task_change::TaskChange;
use crate::testenv::{EnvFilter, EnvId, EnvRequest, TestEnv, TopologiesReport};
use crate::workflow::{
    WorkflowId, WorkflowPlan, WorkflowRequest, WorkflowSubmitted, WorkflowSummary, WorkflowView,
};

/// The first frame a client sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Hello {
    /// The client's [`crate::PROTOCOL_VERSION`].
    pub protocol: u32,
    /// Who is asking, for the daemon's log (for example `nu_plugin_orchestrator 0.1.0`).
    pub client: String,
}

/// The daemon's answer to an acceptable [`Hello`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Welcome {
    /// The daemon's protocol version.
    pub protocol: u32,
    /// The daemon's version.
    pub daemon_version: String,
    /// The daemon's process id.
    pub pid: u32,
}

/// What a client asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "request", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Is the daemon alive, and what is it doing. Answered by [`Response::Health`].
    Health,
    /// The nodes sharing this daemon's PostgreSQL store, and their leader. Answered by
    /// [`Response::Cluster`]; refused on redb, which has no cluster.
    Cluster,
    /// Add tasks to the queue, all or none. Answered by [`Response::Tasks`] once committed.
    Submit {
        /// The tasks, in submission order.
        tasks: Vec<TaskSpec>,
        /// Submit them stashed: held, never started until `ChangeTask` enqueues them.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        stashed: bool,
    },
    /// Tasks matching a filter, newest first. Answered by [`Response::Tasks`].
    List {
        /// Which tasks.
        #[serde(default)]
        filter: TaskFilter,
    },
    /// One task. Answered by [`Response::Task`].
    Get {
        /// Which task.
        id: TaskId,
    },
    /// Wait until every task is in a final state. Answered by [`Response::Tasks`].
    Wait {
        /// Which tasks.
        ids: Vec<TaskId>,
    },
    /// Cancel a task (killing its process group if it runs). Answered by [`Response::Task`]
    /// once the cancellation is committed.
    Cancel {
        /// Which task.
        id: TaskId,
    },
    /// Queue a failed or cancelled task again, with a fresh retry budget.
    Retry {
        /// Which task.
        id: TaskId,
    },
    /// Stream events ([`Response::Event`] items) until the client hangs up.
    Watch {
        /// Replay logged events after this sequence number first (none: live only).
        #[serde(default)]
        since: Option<u64>,
        /// Only events of this task; the stream ends when it reaches a final state.
        #[serde(default)]
        task: Option<TaskId>,
        /// Only events of this workflow and its steps; the stream ends when the workflow
        /// reaches a final state.
        #[serde(default)]
        workflow: Option<WorkflowId>,
    },
    /// A task's output log, as [`Response::Log`] chunks then [`Response::StreamEnd`].
    Logs {
        /// Which task.
        id: TaskId,
        /// Keep streaming new output until the task reaches a final state.
        #[serde(default)]
        follow: bool,
    },
    /// Stop the daemon gracefully. Answered by [`Response::ShuttingDown`].
    Shutdown,
    /// Stop the daemon, leaving running attempts to the supervisor: the next daemon
    /// on the same data directory takes them over (a restart or an upgrade). Answered by
    /// [`Response::ShuttingDown`]. A daemon running without supervisors stops them as for
    /// [`Request::Shutdown`].
    Handover,
    /// Remove finished tasks (and their logs) from the store. Tasks that a kept task
    /// depends on stay. Answered by [`Response::Removed`].
    Clean {
        /// Which tasks.
        #[serde(default)]
        filter: CleanFilter,
    },
    /// Audit log entries, newest first. Answered by [`Response::Audit`].
    Audit {
        /// Which entries.
        #[serde(default)]
        filter: AuditFilter,
    },
    /// Check the audit log's hash chain, archived segments included. Answered by
    /// [`Response::AuditReport`].
    AuditVerify,
    /// The archived segments of the audit log, oldest first. Answered by
    /// [`Response::AuditSegments`].
    AuditSegments,
    /// Archive the oldest audit entries to a segment file, sealed by a checkpoint entry.
    /// Answered by [`Response::AuditCompacted`].
    AuditCompact {
        /// Where to stop: the entries below this sequence number, or before this time.
        before: AuditCut,
    },
    /// The archived segment that holds entry `seq`, as it is on disk (JSON lines), in
    /// [`Response::Log`] chunks then [`Response::StreamEnd`].
    AuditExport {
        /// An entry in the segment.
        seq: u64,
    },
    /// Submit a workflow (or plan it, with `check_mode`). Answered by
    /// [`Response::WorkflowSubmitted`] once it is durable (with `wait`, once it has finished).
    WorkflowSubmit {
        /// The workflow.
        workflow: WorkflowRequest,
    },
    /// The plan of a workflow, without creating it. Answered by [`Response::Plan`].
    WorkflowPlan {
        /// The workflow.
        workflow: WorkflowRequest,
    },
    /// Workflows' summaries, newest first. Answered by [`Response::Workflows`] (in parts).
    Workflows {
        /// At most this many.
        #[serde(default)]
        limit: Option<usize>,
        /// Only workflows with a smaller id (the next page below the last one shown).
        #[serde(default)]
        before: Option<WorkflowId>,
    },
    /// One workflow's summary and a page of its steps and compensations. Answered by
    /// [`Response::Workflow`]; its `next_offset` says where the next page starts.
    Workflow {
        /// Which.
        id: WorkflowId,
        /// The position of the first step to list (steps, then compensations, from 0).
        #[serde(default)]
        offset: u64,
        /// At most this many steps (default and bound: a page stays well under the frame
        /// limit, and may hold fewer).
        #[serde(default)]
        limit: Option<usize>,
    },
    /// Cancel a workflow's unfinished steps. Answered by [`Response::WorkflowSummary`].
    WorkflowCancel {
        /// Which.
        id: WorkflowId,
    },
    /// Compensate a finished workflow's completed steps. Answered by
    /// [`Response::WorkflowSummary`].
    WorkflowRollback {
        /// Which.
        id: WorkflowId,
    },
    /// Run a finished workflow again from one of its steps: a new workflow of that step
    /// and every step after it (its dependants, transitively), the steps before it taken
    /// as done. Answered by [`Response::WorkflowSummary`] (the new workflow's) once it is
    /// durable.
    WorkflowRestart {
        /// The finished workflow.
        id: WorkflowId,
        /// The step to start from.
        step: String,
    },
    /// The extensions registry. Answered by [`Response::Extensions`].
    Extensions,
    /// Create a test environment (and with `auto_start`, start it; with `auto_cleanup`,
    /// also test and delete it). Answered by [`Response::Env`] once it is settled.
    EnvCreate {
        /// What to create.
        env: EnvRequest,
    },
    /// Test environments, newest first (a page of them: see [`EnvFilter`]). Answered by
    /// [`Response::Envs`].
    Envs {
        /// Which environments.
        #[serde(default)]
        filter: EnvFilter,
    },
    /// One test environment. Answered by [`Response::Env`].
    Env {
        /// Which.
        id: EnvId,
    },
    /// Start a created environment (if it is not running), then run its taskservs' tests.
    /// Answered by [`Response::Env`] with the results.
    EnvRun {
        /// Which.
        id: EnvId,
    },
    /// Delete an environment's containers and network. Answered by [`Response::Env`].
    EnvDelete {
        /// Which.
        id: EnvId,
    },
    /// An environment's log (setup, probes and tests) and its containers' logs, as
    /// [`Response::Log`] chunks then [`Response::StreamEnd`].
    EnvLogs {
        /// Which.
        id: EnvId,
        /// Keep streaming until the environment is no longer being set up or tested.
        #[serde(default)]
        follow: bool,
    },
    /// The topology templates. Answered by [`Response::Topologies`].
    Topologies,
    /// The queue's controls and its groups. Answered by [`Response::Queue`].
    Queue,
    /// Change the queue's controls: groups, their limits, pausing and resuming. Answered
    /// by [`Response::Queue`] once the change is durable.
    QueueChange {
        /// The change.
        change: QueueChange,
    },
    /// Pause a running task: its processes are stopped (SIGSTOP) until it is resumed.
    /// Answered by [`Response::Task`] once the pause is durable.
    PauseTask {
        /// Which task.
        id: TaskId,
    },
    /// Resume a paused task (SIGCONT). Answered by [`Response::Task`].
    ResumeTask {
        /// Which task.
        id: TaskId,
    },
    /// Write to the standard input of a running task submitted with `stdin` (at most
    /// [`crate::MAX_INPUT_BYTES`] a request), and close it after when `eof`. Answered by
    /// [`Response::Task`] once the request is durable (audited), before the input is
    /// written.
    SendInput {
        /// Which task.
        id: TaskId,
        /// What to write (a line is sent with its line break).
        data: String,
        /// Close the task's standard input after it.
        #[serde(default)]
        eof: bool,
    },
    /// Send a signal to a running task's process group; what becomes of the task is up
    /// to it. Answered by [`Response::Task`] once the request is durable (audited), before
    /// the signal goes.
    SignalTask {
        /// Which task.
        id: TaskId,
        /// The signal.
        signal: crate::TaskSignal,
    },
    /// Stash, enqueue or edit a task that has not started. Answered by
    /// [`Response::Task`] once the change is durable.
    ChangeTask {
        /// Which task.
        id: TaskId,
        /// The change.
        change: TaskChange,
    },
    /// Create a schedule. Answered by [`Response::Schedule`] once it is durable.
    ScheduleAdd {
        /// The schedule.
        schedule: ScheduleSpec,
    },
    /// Every schedule, by name, with its upcoming times. Answered by
    /// [`Response::Schedules`].
    Schedules {
        /// How many upcoming times of each (default 1, at most
        /// [`crate::MAX_UPCOMING`]).
        #[serde(default)]
        upcoming: Option<u32>,
    },
    /// Pause, resume or remove a schedule. Answered by [`Response::Schedule`] (as it was
    /// removed, for a removal) once the change is durable.
    ScheduleChange {
        /// Which schedule.
        name: String,
        /// The change.
        change: ScheduleChange,
    },
    /// Create a notifier. Answered by [`Response::Notifier`] once it is durable.
    NotifierAdd {
        /// The notifier.
        notifier: NotifierSpec,
    },
    /// Every notifier, by name, with the notifications waiting for each. Answered by
    /// [`Response::Notifiers`].
    Notifiers,
    /// Remove a notifier, or send it a test notification. Answered by
    /// [`Response::Notifier`] once the change is durable.
    NotifierChange {
        /// Which notifier.
        name: String,
        /// The change.
        change: NotifierChange,
    },
}

/// What the daemon answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "response", rename_all = "snake_case")]
pub enum Response {
    /// See [`Request::Health`].
    Health(HealthReport),
    /// See [`Request::Cluster`].
    Cluster(crate::cluster::ClusterView),
    /// A list of tasks, possibly in several frames: `more` says another `Tasks` frame
    /// follows (long lists are sent in parts that each stay well under the frame limit).
    Tasks {
        /// The tasks in this part.
        tasks: Vec<Task>,
        /// Whether another part follows.
        #[serde(default)]
        more: bool,
    },
    /// One task.
    Task {
        /// The task.
        task: Box<Task>,
    },
    /// One item of a watch stream.
    Event {
        /// The event.
        event: Event,
    },
    /// A chunk of a task's log.
    Log {
        /// The text (invalid UTF-8 replaced).
        text: String,
    },
    /// The end of a stream.
    StreamEnd,
    /// The daemon is stopping.
    ShuttingDown,
    /// The tasks and workflows `Clean` removed.
    Removed {
        /// The tasks' ids (workflow steps and compensations included).
        ids: Vec<TaskId>,
        /// The workflows' ids.
        #[serde(default)]
        workflows: Vec<WorkflowId>,
    },
    /// Audit log entries.
    Audit {
        /// The entries, newest first.
        entries: Vec<AuditEntry>,
    },
    /// The audit log check.
    AuditReport(AuditReport),
    /// The archived segments of the audit log.
    AuditSegments {
        /// Oldest first.
        segments: Vec<AuditSegment>,
    },
    /// What `AuditCompact` archived: the new segment, or none when no entry was old enough.
    AuditCompacted {
        /// The new segment.
        segment: Option<AuditSegment>,
    },
    /// See [`Request::WorkflowSubmit`].
    WorkflowSubmitted(Box<WorkflowSubmitted>),
    /// A workflow's plan.
    Plan(Box<WorkflowPlan>),
    /// Workflows' summaries, possibly in several frames: `more` says another `Workflows`
    /// frame follows.
    Workflows {
        /// Newest first.
        workflows: Vec<WorkflowSummary>,
        /// Whether another part follows.
        #[serde(default)]
        more: bool,
    },
    /// One workflow with a page of its steps.
    Workflow(Box<WorkflowView>),
    /// One workflow's summary.
    WorkflowSummary(Box<WorkflowSummary>),
    /// The extensions registry.
    Extensions(Box<ExtensionsReport>),
    /// One test environment.
    Env(Box<TestEnv>),
    /// Test environments.
    Envs {
        /// Newest first.
        envs: Vec<TestEnv>,
    },
    /// The topology templates.
    Topologies(Box<TopologiesReport>),
    /// The queue's controls and its groups.
    Queue(QueueView),
    /// One schedule.
    Schedule(Box<Schedule>),
    /// Schedules, by name.
    Schedules {
        /// The schedules.
        schedules: Vec<ScheduleView>,
    },
    /// One notifier.
    Notifier(Box<Notifier>),
    /// Notifiers, by name, and the notifications waiting in the outbox.
    Notifiers {
        /// The notifiers.
        notifiers: Vec<Notifier>,
        /// The first notifications not delivered yet (by key: the oldest events first, at
        /// most 100).
        waiting: Vec<crate::notify::OutboxEntry>,
    },
    /// The request failed; nothing was changed.
    Error(ErrorReply),
}

/// Broad classes of failure, so clients can react without parsing messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The request was malformed or invalid.
    BadRequest,
    /// The named task does not exist.
    NotFound,
    /// The request conflicts with the task's state (for example cancelling a finished task).
    Conflict,
    /// The peer's protocol version differs.
    VersionMismatch,
    /// The peer may not use this daemon.
    PermissionDenied,
    /// A frame exceeded the maximum size.
    TooLarge,
    /// The daemon is shutting down.
    Unavailable,
    /// Something failed inside the daemon (for example the store).
    Internal,
}

/// An error answer: what went wrong, and which request field it concerns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorReply {
    /// The class of failure.
    pub kind: ErrorKind,
    /// A message for a person, naming the problem.
    pub message: String,
    /// The request field at fault, such as `after` or `id`, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The socket of the node that serves the request, when it is on the same host and
    /// this one does not (a standby refusing what only the leader serves, or a node asked
    /// for the log of an attempt another node ran): a client may send it there instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_socket: Option<std::path::PathBuf>,
}

impl ErrorReply {
    /// An error about the request as a whole.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ErrorReply {
        ErrorReply {
            kind,
            message: message.into(),
            field: None,
            leader_socket: None,
        }
    }

    /// An error about one field of the request.
    pub fn field(kind: ErrorKind, field: &str, message: impl Into<String>) -> ErrorReply {
        ErrorReply {
            kind,
            message: message.into(),
            field: Some(field.to_string()),
            leader_socket: None,
        }
    }
}

impl std::fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ErrorReply {}
