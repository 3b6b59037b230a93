//! What a workflow would do, computed without running anything, and the answer to a
//! submission (a plan, or the created workflow).

use serde::{Deserialize, Serialize};

use super::{WorkflowKind, WorkflowSummary};

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
