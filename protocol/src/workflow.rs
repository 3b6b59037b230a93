//! Workflows: requests that expand into a DAG of steps, their durable record, their plan,
//! and the extensions (providers, taskservs, clusters) they are built from.
//!
//! A workflow's id comes from the same sequence as task ids, so an id names either a
//! task or a workflow, never both. Each step runs as a task that carries a [`StepRef`].

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};

use crate::types::{TaskId, TaskSpec, TaskStatus};

/// Identifier of a workflow (shared sequence with task ids).
pub type WorkflowId = u64;

/// The most entries a request's lists of servers or operations may hold: each becomes at
/// least one step, and a workflow has at most this many steps.
pub const MAX_LIST_LEN: usize = 100_000;

/// A list of at most [`MAX_LIST_LEN`] entries, refused while it is read, so a longer one is
/// never held in memory.
fn bounded_list<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Bounded<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Bounded<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a list of at most {MAX_LIST_LEN} entries")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut items = Vec::new();
            while let Some(item) = seq.next_element()? {
                if items.len() == MAX_LIST_LEN {
                    return Err(serde::de::Error::custom(format!(
                        "more than {MAX_LIST_LEN} entries (a workflow has at most {MAX_LIST_LEN} steps)"
                    )));
                }
                items.push(item);
            }
            Ok(items)
        }
    }
    deserializer.deserialize_seq(Bounded(std::marker::PhantomData))
}

/// Marks a task as a step of a workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct StepRef {
    /// The workflow.
    pub workflow: WorkflowId,
    /// The step's id within the workflow.
    pub step: String,
    /// True for the task that compensates the step during a rollback.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rollback: bool,
}

/// Create servers of an infra (and install the taskservs its settings list for them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ServersRequest {
    /// The infra: a plain name (no `/`, no `..`) looked up as `<workspace>/infra/<name>` or
    /// `<workspace>/<name>`.
    pub infra: String,
    /// The settings file: a plain file name in the infra directory (default: the first of
    /// `settings.toml`, `.yaml`, `.yml`, `.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<String>,
    /// The workspace directory (default: the daemon's `--workspace`). Only the daemon's
    /// owner on its socket may name another one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// Hostnames from the settings (all of them when empty), each at most once.
    #[serde(default, deserialize_with = "bounded_list")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<String>"))]
    pub servers: Vec<String>,
    /// Plan only: answer with the waves that would run, run nothing.
    #[serde(default)]
    pub check_mode: bool,
    /// Answer only once the workflow has finished.
    #[serde(default)]
    pub wait: bool,
    /// Queue priority of every step (higher first).
    #[serde(default)]
    pub priority: i32,
    /// How many of its steps may run at once (on top of the daemon's limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_limit: Option<u32>,
    /// When a step fails, compensate the completed steps with their rollback scripts.
    #[serde(default)]
    pub rollback_enabled: bool,
}

/// Install a taskserv (with its dependencies and add-ons) on servers of an infra.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskservRequest {
    /// The infra: a plain name (no `/`, no `..`) looked up as `<workspace>/infra/<name>` or
    /// `<workspace>/<name>`.
    pub infra: String,
    /// The settings file: a plain file name in the infra directory (default: the first of
    /// `settings.toml`, `.yaml`, `.yml`, `.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<String>,
    /// The workspace directory (default: the daemon's `--workspace`). Only the daemon's
    /// owner on its socket may name another one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// The taskserv's name.
    pub taskserv: String,
    /// Hostnames from the settings (all of them when empty), each at most once.
    #[serde(default, deserialize_with = "bounded_list")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<String>"))]
    pub servers: Vec<String>,
    /// Plan only: answer with the waves that would run, run nothing.
    #[serde(default)]
    pub check_mode: bool,
    /// Answer only once the workflow has finished.
    #[serde(default)]
    pub wait: bool,
    /// Queue priority of every step (higher first).
    #[serde(default)]
    pub priority: i32,
    /// How many of its steps may run at once (on top of the daemon's limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_limit: Option<u32>,
    /// When a step fails, compensate the completed steps with their rollback scripts.
    #[serde(default)]
    pub rollback_enabled: bool,
}

/// Create a cluster from a cluster definition: its nodes, their taskservs, its setup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ClusterRequest {
    /// The infra: a plain name (no `/`, no `..`) looked up as `<workspace>/infra/<name>` or
    /// `<workspace>/<name>`.
    pub infra: String,
    /// The settings file: a plain file name in the infra directory (default: the first of
    /// `settings.toml`, `.yaml`, `.yml`, `.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<String>,
    /// The workspace directory (default: the daemon's `--workspace`). Only the daemon's
    /// owner on its socket may name another one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// The cluster definition's name (`orch extensions clusters`).
    pub cluster: String,
    /// The provider of its nodes (default: the infra's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Plan only: answer with the waves that would run, run nothing.
    #[serde(default)]
    pub check_mode: bool,
    /// Answer only once the workflow has finished.
    #[serde(default)]
    pub wait: bool,
    /// Queue priority of every step (higher first).
    #[serde(default)]
    pub priority: i32,
    /// How many of its steps may run at once (on top of the daemon's limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_limit: Option<u32>,
    /// When a step fails, compensate the completed steps with their rollback scripts.
    #[serde(default)]
    pub rollback_enabled: bool,
}

/// One operation of a batch workflow: one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Operation {
    /// Its id, unique in the workflow; dependencies name it.
    pub id: String,
    /// What it does: `server_create` (or `server_batch`), `taskserv_create` (or
    /// `taskserv_batch`), `nu`, `script` or `command`.
    #[serde(rename = "type")]
    pub op_type: String,
    /// The provider of its servers (default: each server's, then the infra's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Operations that must succeed first; when one fails, this one is skipped.
    #[serde(default)]
    pub dependencies: Vec<String>,
    /// Operations that must finish first, whatever their outcome.
    #[serde(default)]
    pub soft_dependencies: Vec<String>,
    /// Servers it acts on (server and taskserv operations; all of the infra's when empty),
    /// each at most once.
    #[serde(default, deserialize_with = "bounded_list")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<String>"))]
    pub servers: Vec<String>,
    /// The taskserv to install (taskserv operations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taskserv: Option<String>,
    /// Nushell code (`nu` operations); `$params` holds `params`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nu: Option<String>,
    /// A Nushell script file (`script` operations), a relative path inside the workflow
    /// file's directory (no `..`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<PathBuf>,
    /// A program and its arguments (`command` operations).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Nushell code that compensates this operation in a rollback (`nu`, `script` and
    /// `command` operations; server and taskserv operations use their extensions').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<String>,
    /// Parameters for the operation's code.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub params: serde_json::Value,
    /// How often a failed attempt is retried.
    #[serde(default)]
    pub retries: u32,
    /// Kill an attempt after this long (`30s`, `5min`, `1h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// A batch workflow definition (from a TOML, NUON, JSON or Nickel file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct BatchWorkflow {
    /// Its name.
    pub name: String,
    /// Its version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// How many operations may run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_limit: Option<u32>,
    /// Compensate completed operations when one fails.
    #[serde(default)]
    pub rollback_enabled: bool,
    /// Queue priority of its operations.
    #[serde(default)]
    pub priority: i32,
    /// The operations.
    #[serde(deserialize_with = "bounded_list")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<Operation>"))]
    pub operations: Vec<Operation>,
}

/// A batch workflow with where it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// The definition.
    pub workflow: BatchWorkflow,
    /// The infra its server and taskserv operations use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra: Option<String>,
    /// The settings file: a plain file name in the infra directory (default: the first of
    /// `settings.toml`, `.yaml`, `.yml`, `.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<String>,
    /// The workspace directory (default: the daemon's `--workspace`). Only the daemon's
    /// owner on its socket may name another one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// Directory that relative `script` paths are taken from (the workflow file's); inside
    /// the daemon's workspace unless the daemon's owner submits on its socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_dir: Option<PathBuf>,
    /// Plan only: answer with the waves that would run, run nothing.
    #[serde(default)]
    pub check_mode: bool,
    /// Answer only once the workflow has finished.
    #[serde(default)]
    pub wait: bool,
}

/// A workflow submission.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkflowRequest {
    /// See [`ServersRequest`].
    Servers(ServersRequest),
    /// See [`TaskservRequest`].
    Taskserv(TaskservRequest),
    /// See [`ClusterRequest`].
    Cluster(ClusterRequest),
    /// See [`BatchRequest`].
    Batch(BatchRequest),
}

impl WorkflowRequest {
    /// The kind's name.
    pub fn kind(&self) -> WorkflowKind {
        match self {
            WorkflowRequest::Servers(_) => WorkflowKind::Servers,
            WorkflowRequest::Taskserv(_) => WorkflowKind::Taskserv,
            WorkflowRequest::Cluster(_) => WorkflowKind::Cluster,
            WorkflowRequest::Batch(_) => WorkflowKind::Batch,
        }
    }

    /// Whether only a plan is asked for.
    pub fn check_mode(&self) -> bool {
        match self {
            WorkflowRequest::Servers(r) => r.check_mode,
            WorkflowRequest::Taskserv(r) => r.check_mode,
            WorkflowRequest::Cluster(r) => r.check_mode,
            WorkflowRequest::Batch(r) => r.check_mode,
        }
    }

    /// The workspace the request names, if any.
    pub fn workspace(&self) -> Option<&std::path::Path> {
        match self {
            WorkflowRequest::Servers(r) => r.workspace.as_deref(),
            WorkflowRequest::Taskserv(r) => r.workspace.as_deref(),
            WorkflowRequest::Cluster(r) => r.workspace.as_deref(),
            WorkflowRequest::Batch(r) => r.workspace.as_deref(),
        }
    }

    /// The directory a batch request takes its scripts from, if it names one.
    pub fn base_dir(&self) -> Option<&std::path::Path> {
        match self {
            WorkflowRequest::Batch(r) => r.base_dir.as_deref(),
            _ => None,
        }
    }

    /// Whether the answer waits for the end of the workflow.
    pub fn wait(&self) -> bool {
        match self {
            WorkflowRequest::Servers(r) => r.wait,
            WorkflowRequest::Taskserv(r) => r.wait,
            WorkflowRequest::Cluster(r) => r.wait,
            WorkflowRequest::Batch(r) => r.wait,
        }
    }
}

/// The four kinds of workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WorkflowKind {
    /// Server creation.
    Servers,
    /// Taskserv installation.
    Taskserv,
    /// Cluster creation.
    Cluster,
    /// A batch of operations.
    Batch,
}

impl WorkflowKind {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowKind::Servers => "servers",
            WorkflowKind::Taskserv => "taskserv",
            WorkflowKind::Cluster => "cluster",
            WorkflowKind::Batch => "batch",
        }
    }
}

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
            Some(TaskStatus::Queued) => &mut self.queued,
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

/// A step in a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PlannedStep {
    /// Its id.
    pub id: String,
    /// What it does.
    pub description: String,
    /// Hard dependencies.
    pub dependencies: Vec<String>,
    /// Soft dependencies.
    pub soft_dependencies: Vec<String>,
    /// Whether a rollback would compensate it.
    pub has_rollback: bool,
}

/// What a workflow would do, computed without running anything. A plan of a big
/// workflow lists its first steps and the ids of its first waves only (about
/// [`WorkflowPlan::MAX_LISTED_BYTES`] of JSON per list, so that it fits in a frame); the
/// counts are always complete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WorkflowPlan {
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: WorkflowKind,
    /// The number of steps allowed to run at once (the workflow's and the daemon's limits).
    pub parallel_limit: u32,
    /// How many steps it has.
    pub step_count: u64,
    /// The steps, dependencies first (the first ones only, for a big workflow).
    pub steps: Vec<PlannedStep>,
    /// How many waves a run would go through.
    pub wave_count: u64,
    /// Step ids that would run together, wave after wave, if every step succeeded (the
    /// first waves only, for a big workflow; the last one listed may be cut short).
    pub waves: Vec<Vec<String>>,
    /// How many compensation waves a rollback of the whole workflow would run.
    pub rollback_wave_count: u64,
    /// The compensation waves a rollback of the whole workflow would run (the first ones
    /// only, for a big workflow).
    pub rollback_waves: Vec<Vec<String>>,
    /// True when `steps`, `waves` or `rollback_waves` do not list everything.
    #[serde(default)]
    pub truncated: bool,
}

impl WorkflowPlan {
    /// About how much JSON each of a plan's lists may take.
    pub const MAX_LISTED_BYTES: usize = 2 * 1024 * 1024;
}

/// What answers a workflow submission.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum WorkflowSubmitted {
    /// `check_mode`: the plan, nothing was created.
    Planned(WorkflowPlan),
    /// The workflow was created (and, with `wait`, has finished): its summary (its
    /// steps can be read in pages with `Request::Workflow`).
    Created(WorkflowSummary),
}

/// A problem with one extension's manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ManifestProblem {
    /// The manifest's path.
    pub path: PathBuf,
    /// What is wrong.
    pub problem: String,
}

/// A provider, as its manifest describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProviderInfo {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// What it is.
    pub description: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Its Nushell module, relative to `dir`.
    pub module: String,
}

/// A taskserv, as its manifest describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TaskservInfo {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// What it is.
    pub description: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Taskservs installed before it on the same server.
    pub dependencies: Vec<String>,
    /// Taskservs installed after it whenever it is requested.
    pub addons: Vec<String>,
    /// Its scripts by purpose (`install`, `check`, `test`, `rollback`), relative to `dir`.
    pub scripts: std::collections::BTreeMap<String, String>,
    /// Its readiness probe, a shell command run on the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
    /// The image its test environments use (pulled when a registry is reachable); none:
    /// the base image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// A readiness probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Probe {
    /// The shell command.
    pub command: String,
    /// A text the output must contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<String>,
    /// How long to keep trying (`30s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// A node of a cluster definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ClusterNode {
    /// Its hostname.
    pub hostname: String,
    /// Its role.
    #[serde(default)]
    pub role: String,
    /// The taskservs it runs.
    #[serde(default)]
    pub taskservs: Vec<String>,
}

/// A cluster definition, as its manifest describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ClusterInfo {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// What it is.
    pub description: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Its nodes.
    pub nodes: Vec<ClusterNode>,
    /// Its setup script, relative to `dir`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<String>,
}

/// The whole extensions registry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ExtensionsReport {
    /// The directory they were read from.
    pub modules_dir: PathBuf,
    /// Providers, by name.
    pub providers: Vec<ProviderInfo>,
    /// Taskservs, by name.
    pub taskservs: Vec<TaskservInfo>,
    /// Cluster definitions, by name.
    pub clusters: Vec<ClusterInfo>,
    /// Manifests that could not be loaded.
    pub problems: Vec<ManifestProblem>,
    /// How long reading them took, in microseconds.
    pub load_micros: u64,
}
