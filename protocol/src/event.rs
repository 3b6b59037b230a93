//! The event log: each state change of a task or a workflow emits exactly one event.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::state::{AttemptOutcome, TaskStatus};
use crate::task::{Progress, TaskId};
use crate::testenv::EnvState;
use crate::workflow::{WorkflowId, WorkflowStatus};

/// Position of an event in the daemon's event log.
pub type EventSeq = u64;

/// What happened to a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// The task was accepted, in its first state.
    Submitted {
        /// Blocked, delayed or queued.
        status: TaskStatus,
    },
    /// Its dependencies succeeded before its start time: it waits for it.
    Delayed {
        /// When it is queued.
        until: DateTime<Utc>,
    },
    /// Its dependencies succeeded, its start time came, or its retry delay passed: it
    /// is ready.
    Queued,
    /// An attempt started.
    Started {
        /// Which attempt.
        attempt: u32,
    },
    /// Its running attempt was paused (its processes stopped).
    Paused {
        /// Which attempt.
        attempt: u32,
    },
    /// Its paused attempt runs again.
    Resumed {
        /// Which attempt.
        attempt: u32,
    },
    /// The task reported progress.
    Progress {
        /// What it reported.
        progress: Progress,
    },
    /// An attempt failed and another one will follow.
    AttemptFailed {
        /// The failed attempt.
        attempt: u32,
        /// How it ended.
        outcome: AttemptOutcome,
        /// When the next attempt is due.
        retry_at: DateTime<Utc>,
    },
    /// An attempt could not start for lack of system resources (file descriptors,
    /// processes): it is not counted, and the task is started again at `retry_at`.
    StartDeferred {
        /// The attempt that could not start (it keeps its number).
        attempt: u32,
        /// The system's error, e.g. `Too many open files`.
        reason: String,
        /// When the attempt is tried again.
        retry_at: DateTime<Utc>,
    },
    /// The task succeeded.
    Succeeded {
        /// The attempt that succeeded.
        attempt: u32,
    },
    /// The task failed for good.
    Failed {
        /// How the last attempt ended.
        outcome: AttemptOutcome,
    },
    /// The task was cancelled.
    Cancelled,
    /// The task will not run because a dependency failed.
    DependencyFailed {
        /// The dependency that failed.
        dependency: TaskId,
    },
    /// A finished task was put back in the queue on request.
    Retried,
    /// A task that had not started was stashed on request: it starts only once enqueued.
    Stashed,
    /// A stashed task was released on request, into this state.
    Enqueued {
        /// Blocked, delayed or queued.
        status: TaskStatus,
    },
    /// A task that had not started was changed on request.
    Edited {
        /// The fields that were replaced (`command`, `priority`, `label`, `env`, `params`,
        /// `after`).
        fields: Vec<String>,
        /// Its state after the change (new dependencies may block a queued task, or
        /// release a blocked one).
        status: TaskStatus,
    },
    /// A finished task was removed from the store (`orch clean`).
    Removed,
    /// A workflow changed state (the event's `task` is the workflow's id).
    Workflow {
        /// Its new status.
        status: WorkflowStatus,
        /// Why, in words (the failed step, the rollback's reason).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// A test environment's record changed: a stage began or ended, probes or test
    /// results were recorded, or it is being deleted (the event's `task` is the
    /// environment's id).
    Env {
        /// Its state after the change.
        state: EnvState,
    },
}

impl EventKind {
    /// The name of every event type, as in its `type` field.
    pub const NAMES: [&'static str; 20] = [
        "submitted",
        "delayed",
        "queued",
        "started",
        "paused",
        "resumed",
        "progress",
        "attempt_failed",
        "start_deferred",
        "succeeded",
        "failed",
        "cancelled",
        "dependency_failed",
        "retried",
        "stashed",
        "enqueued",
        "edited",
        "removed",
        "workflow",
        "env",
    ];

    /// True for the events that leave a task, a workflow or a test environment in a
    /// final state (an environment's is `deleted`).
    pub fn is_final(&self) -> bool {
        match self {
            EventKind::Succeeded { .. }
            | EventKind::Failed { .. }
            | EventKind::Cancelled
            | EventKind::DependencyFailed { .. } => true,
            EventKind::Workflow { status, .. } => status.is_final(),
            EventKind::Env { state } => matches!(state, EnvState::Deleted { .. }),
            _ => false,
        }
    }

    /// The event's name, as in its `type` field.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Submitted { .. } => "submitted",
            EventKind::Delayed { .. } => "delayed",
            EventKind::Queued => "queued",
            EventKind::Started { .. } => "started",
            EventKind::Paused { .. } => "paused",
            EventKind::Resumed { .. } => "resumed",
            EventKind::Progress { .. } => "progress",
            EventKind::AttemptFailed { .. } => "attempt_failed",
            EventKind::StartDeferred { .. } => "start_deferred",
            EventKind::Succeeded { .. } => "succeeded",
            EventKind::Failed { .. } => "failed",
            EventKind::Cancelled => "cancelled",
            EventKind::DependencyFailed { .. } => "dependency_failed",
            EventKind::Retried => "retried",
            EventKind::Stashed => "stashed",
            EventKind::Enqueued { .. } => "enqueued",
            EventKind::Edited { .. } => "edited",
            EventKind::Removed => "removed",
            EventKind::Workflow { .. } => "workflow",
            EventKind::Env { .. } => "env",
        }
    }
}

/// One entry of the event log: each state change emits exactly one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Event {
    /// Position in the log, increasing.
    pub seq: EventSeq,
    /// When it happened.
    pub at: DateTime<Utc>,
    /// The task it concerns (for a workflow event, the workflow).
    pub task: TaskId,
    /// The workflow the task belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowId>,
    /// What happened.
    pub kind: EventKind,
}
