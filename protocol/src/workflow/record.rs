//! A workflow as stored: its steps, the compensations its rollbacks created, and its
//! state.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{WorkflowId, WorkflowKind};
use crate::task::{TaskId, TaskSpec};

/// One step of a workflow as stored: the task that runs it and how it is compensated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WorkflowStep {
    /// Its id in the workflow.
    pub id: String,
    /// What it does, in words.
    pub description: String,
    /// The task that runs it.
    pub task: TaskId,
    /// Steps that must succeed first.
    #[serde(default)]
    pub dependencies: Vec<String>,
    /// Steps that must finish first, whatever their outcome.
    #[serde(default)]
    pub soft_dependencies: Vec<String>,
    /// What a rollback runs to compensate it (none: nothing to undo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<TaskSpec>,
    /// The wave of the plan it runs in, from 1, as planned at submission (none in a
    /// record from before waves were kept per step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub wave: Option<u32>,
}

/// A compensation task created by a rollback.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RollbackStep {
    /// The step it compensates.
    pub step: String,
    /// The task that runs the compensation.
    pub task: TaskId,
    /// Which rollback (1 for the first; a rollback can be asked for again after it failed).
    pub round: u32,
}

/// Where a workflow is in its life.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum WorkflowState {
    /// Steps are running or waiting.
    Running {
        /// Since when.
        since: DateTime<Utc>,
    },
    /// Every step succeeded.
    Succeeded {
        /// When the last step finished.
        finished_at: DateTime<Utc>,
    },
    /// Some steps failed (without rollback); their dependants were skipped.
    Failed {
        /// When the last step finished.
        finished_at: DateTime<Utc>,
        /// The steps that did not succeed.
        failed: Vec<String>,
    },
    /// Cancelled on request.
    Cancelled {
        /// When.
        at: DateTime<Utc>,
    },
    /// Compensating completed steps.
    RollingBack {
        /// Since when.
        since: DateTime<Utc>,
        /// Why (the failed step, or a manual request).
        reason: String,
        /// Which rollback.
        round: u32,
        /// True once the compensation tasks exist (they are created when no step of the
        /// workflow is running any more).
        started: bool,
    },
    /// Every completed step was compensated.
    RolledBack {
        /// When the last compensation finished.
        finished_at: DateTime<Utc>,
        /// Why the rollback happened.
        reason: String,
    },
    /// A compensation failed (the steps it guarded stay in place).
    RollbackFailed {
        /// When the rollback ended.
        finished_at: DateTime<Utc>,
        /// The steps whose compensation did not succeed.
        failed: Vec<String>,
    },
}

impl WorkflowState {
    /// The state's name without its data.
    pub fn status(&self) -> WorkflowStatus {
        match self {
            WorkflowState::Running { .. } => WorkflowStatus::Running,
            WorkflowState::Succeeded { .. } => WorkflowStatus::Succeeded,
            WorkflowState::Failed { .. } => WorkflowStatus::Failed,
            WorkflowState::Cancelled { .. } => WorkflowStatus::Cancelled,
            WorkflowState::RollingBack { .. } => WorkflowStatus::RollingBack,
            WorkflowState::RolledBack { .. } => WorkflowStatus::RolledBack,
            WorkflowState::RollbackFailed { .. } => WorkflowStatus::RollbackFailed,
        }
    }
}

/// The name of a [`WorkflowState`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WorkflowStatus {
    /// See [`WorkflowState::Running`].
    Running,
    /// See [`WorkflowState::Succeeded`].
    Succeeded,
    /// See [`WorkflowState::Failed`].
    Failed,
    /// See [`WorkflowState::Cancelled`].
    Cancelled,
    /// See [`WorkflowState::RollingBack`].
    RollingBack,
    /// See [`WorkflowState::RolledBack`].
    RolledBack,
    /// See [`WorkflowState::RollbackFailed`].
    RollbackFailed,
}

impl WorkflowStatus {
    /// True for the states a workflow leaves only on request (a manual rollback).
    pub fn is_final(self) -> bool {
        !matches!(self, WorkflowStatus::Running | WorkflowStatus::RollingBack)
    }

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowStatus::Running => "running",
            WorkflowStatus::Succeeded => "succeeded",
            WorkflowStatus::Failed => "failed",
            WorkflowStatus::Cancelled => "cancelled",
            WorkflowStatus::RollingBack => "rolling_back",
            WorkflowStatus::RolledBack => "rolled_back",
            WorkflowStatus::RollbackFailed => "rollback_failed",
        }
    }
}

/// A workflow as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Workflow {
    /// Its id (from the task id sequence).
    pub id: WorkflowId,
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: WorkflowKind,
    /// The request it was created from.
    pub request: serde_json::Value,
    /// When it was submitted.
    pub submitted_at: DateTime<Utc>,
    /// Queue priority of its steps.
    pub priority: i32,
    /// How many of its tasks may run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_limit: Option<u32>,
    /// Whether a failed step starts a rollback.
    pub rollback_enabled: bool,
    /// Its steps, dependencies first.
    pub steps: Vec<WorkflowStep>,
    /// Compensation tasks created by rollbacks.
    #[serde(default)]
    pub rollback_steps: Vec<RollbackStep>,
    /// Where it is.
    pub state: WorkflowState,
    /// The sequence number of the event of its last state change (a watch ends there).
    #[serde(default)]
    pub last_event: u64,
    /// How many waves a run goes through under its limits, as planned at submission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waves: Option<u64>,
}
