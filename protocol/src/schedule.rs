//! Schedules: a task or a workflow submitted at the times a cron pattern gives, in an
//! explicit time zone, durable across restarts, with a policy for the runs missed while
//! the daemon was down (or the schedule paused).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::audit::Actor;
use crate::task::{TaskId, TaskSpec};
use crate::workflow::WorkflowRequest;

/// The most schedules a daemon keeps.
pub const MAX_SCHEDULES: usize = 1000;

/// The most upcoming runs a list shows of each schedule.
pub const MAX_UPCOMING: u32 = 100;

/// The most missed runs `catch_up: all` makes up for in a row (the first ones; later ones
/// are skipped).
pub const MAX_CATCH_UP: u32 = 100;

/// What runs at each time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ScheduledWork {
    /// A task, submitted as `orch submit` would.
    Task {
        /// Its spec.
        task: Box<TaskSpec>,
    },
    /// A workflow, expanded from the workspace as it is at each run.
    Workflow {
        /// Its request.
        workflow: Box<WorkflowRequest>,
    },
}

/// What becomes of the runs missed while the daemon was down or the schedule paused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// None runs; the schedule goes on at its next time.
    #[default]
    Skip,
    /// One run makes up for all of them, at once.
    Once,
    /// Each runs, at once, in order (the first [`MAX_CATCH_UP`]; later ones are skipped).
    All,
}

/// A schedule as submitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    /// Its name (letters, digits, `_`, `-` and `.`): how it is named in every command.
    pub name: String,
    /// A cron pattern: 5 fields (minute hour day-of-month month day-of-week), or 6 with
    /// seconds first; `L`, `W` and `#` as croner reads them.
    pub cron: String,
    /// The IANA time zone the pattern is read in (`Europe/Berlin`; default `UTC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// What becomes of missed runs.
    #[serde(default)]
    pub catch_up: CatchUp,
    /// What runs.
    pub work: ScheduledWork,
}

impl ScheduleSpec {
    /// The time zone's name.
    pub fn timezone_name(&self) -> &str {
        self.timezone.as_deref().unwrap_or("UTC")
    }
}

/// One run of a schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScheduleRun {
    /// The time the pattern gave.
    pub slot: DateTime<Utc>,
    /// When it was submitted.
    pub at: DateTime<Utc>,
    /// The task, or the workflow, it submitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<TaskId>,
    /// Why nothing was submitted (the workflow could not be expanded, the task was
    /// refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A schedule as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Schedule {
    /// What was submitted.
    pub spec: ScheduleSpec,
    /// Who created it (its runs are audited as theirs, through the `schedule` interface).
    pub created_by: Actor,
    /// When.
    pub created_at: DateTime<Utc>,
    /// The host of its creator when that was the daemon's owner on its socket (who may
    /// name any workspace): its workflow runs are unconfined on that host only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_host: Option<String>,
    /// Paused: it submits nothing until resumed (missed runs then follow `catch_up`).
    #[serde(default)]
    pub paused: bool,
    /// Its next time (none: the pattern has no more).
    pub next_run: Option<DateTime<Utc>>,
    /// How many runs submitted something.
    #[serde(default)]
    pub runs: u64,
    /// How many runs were skipped (missed, by `catch_up`).
    #[serde(default)]
    pub skipped: u64,
    /// Its last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<ScheduleRun>,
}

/// A schedule with its upcoming times, as lists show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScheduleView {
    /// The schedule.
    #[serde(flatten)]
    pub schedule: Schedule,
    /// Its next times, first the next run.
    pub upcoming: Vec<DateTime<Utc>>,
}

/// A change to a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ScheduleChange {
    /// Submit nothing until resumed.
    Pause,
    /// Submit again (missed runs follow its `catch_up`).
    Resume,
    /// Remove it (what it submitted stays).
    Remove,
}
