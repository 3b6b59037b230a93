//! What answers about a workflow carry: a summary whose size does not grow with its steps,
//! and pages of its steps with their tasks' statuses.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{WorkflowId, WorkflowKind, WorkflowState};
use crate::state::TaskStatus;
use crate::task::TaskId;

/// How many tasks of a workflow are in each status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StatusCounts {
    /// Waiting for their dependencies.
    pub blocked: u64,
    /// Waiting for a slot.
    pub queued: u64,
    /// Running.
    pub running: u64,
    /// Waiting to be retried.
    pub retry_waiting: u64,
    /// Succeeded.
    pub succeeded: u64,
    /// Failed.
    pub failed: u64,
    /// Cancelled.
    pub cancelled: u64,
    /// Skipped: a dependency failed.
    pub dependency_failed: u64,
    /// Removed from the store by `orch clean`.
    pub removed: u64,
}

impl StatusCounts {
    /// Counts one task in `status` (`None`: a removed task).
    pub fn add(&mut self, status: Option<TaskStatus>) {
        let count = match status {
            Some(TaskStatus::Blocked) => &mut self.blocked,
            // Steps have no start time and are never stashed (a delayed or stashed task
            // would be queued but for its time or its stash).
            Some(TaskStatus::Queued | TaskStatus::Delayed | TaskStatus::Stashed) => {
                &mut self.queued
            }
            Some(TaskStatus::Running) => &mut self.running,
            Some(TaskStatus::RetryWaiting) => &mut self.retry_waiting,
            Some(TaskStatus::Succeeded) => &mut self.succeeded,
            Some(TaskStatus::Failed) => &mut self.failed,
            Some(TaskStatus::Cancelled) => &mut self.cancelled,
            Some(TaskStatus::DependencyFailed) => &mut self.dependency_failed,
            None => &mut self.removed,
        };
        *count += 1;
    }

    /// Each count with its status's name, in life-cycle order (`removed` last).
    pub fn by_name(&self) -> [(&'static str, u64); 9] {
        [
            ("blocked", self.blocked),
            ("queued", self.queued),
            ("running", self.running),
            ("retry_waiting", self.retry_waiting),
            ("succeeded", self.succeeded),
            ("failed", self.failed),
            ("cancelled", self.cancelled),
            ("dependency_failed", self.dependency_failed),
            ("removed", self.removed),
        ]
    }
}

/// What every answer about a workflow carries: its record without its steps, and how
/// many steps (and compensations) are in each status. Its size does not grow with the
/// number of steps, so it always fits in a frame; the steps themselves come in pages
/// ([`WorkflowView`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WorkflowSummary {
    /// Its id (from the task id sequence).
    pub id: WorkflowId,
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: WorkflowKind,
    /// When it was submitted.
    pub submitted_at: DateTime<Utc>,
    /// Queue priority of its steps.
    pub priority: i32,
    /// How many of its tasks may run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_limit: Option<u32>,
    /// Whether a failed step starts a rollback.
    pub rollback_enabled: bool,
    /// Where it is. The lists of failed steps hold at most
    /// [`WorkflowSummary::MAX_FAILED_IDS`] ids; `step_counts` has the totals.
    pub state: WorkflowState,
    /// The sequence number of the event of its last state change (a watch ends there).
    pub last_event: u64,
    /// How many steps it has.
    pub steps: u64,
    /// How many of its steps are in each status.
    pub step_counts: StatusCounts,
    /// How many compensation tasks its rollbacks created.
    pub compensations: u64,
    /// How many of its compensations are in each status.
    pub compensation_counts: StatusCounts,
    /// How many waves a run goes through under its limits, as planned when it was
    /// submitted (none for workflows recorded before this was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waves: Option<u64>,
}

impl WorkflowSummary {
    /// The most failed step ids a summary's state lists.
    pub const MAX_FAILED_IDS: usize = 100;
}

/// One step (or compensation) of a workflow with its task's current status, for
/// `orch workflow show`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepStatus {
    /// The step's id.
    pub id: String,
    /// Its task.
    pub task: TaskId,
    /// The task's status (none: the task was removed by `orch clean`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TaskStatus>,
    /// True for a compensation task.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rollback: bool,
    /// Which rollback created it (compensations only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    /// What it does, in words (steps only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Steps that must succeed first (steps only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<String>,
    /// Steps that must finish first, whatever their outcome (steps only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub soft_dependencies: Vec<String>,
    /// Whether a rollback would compensate it (steps only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub has_rollback: bool,
    /// The wave of the plan it runs in, from 1: the waves a run goes through if every
    /// step took the same time, under the workflow's and the daemon's parallel limits, as
    /// planned at submission (steps only; none for workflows recorded before this was
    /// kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub wave: Option<u32>,
}

/// A workflow's summary with one page of its steps and compensations: the steps in
/// dependency order, then the compensations in the order they were created, numbered
/// from 0 together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WorkflowView {
    /// The summary.
    pub workflow: WorkflowSummary,
    /// The position of the page's first entry.
    pub offset: u64,
    /// The page: steps, then compensations.
    pub tasks: Vec<StepStatus>,
    /// Where the next page starts (none: this page is the last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    /// The request the workflow was created from: on the first page, when it is at most
    /// [`WorkflowView::MAX_REQUEST_BYTES`] of JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<serde_json::Value>,
}

impl WorkflowView {
    /// The largest request a view repeats.
    pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;
}
