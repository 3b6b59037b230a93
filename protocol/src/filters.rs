//! Which tasks a request is about: the tasks to list, and the finished ones to clean.

use serde::{Deserialize, Serialize};

use crate::state::TaskStatus;

/// Which tasks `List` returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskFilter {
    /// Only tasks in one of these states (all when empty).
    #[serde(default)]
    pub status: Vec<TaskStatus>,
    /// Only tasks with this label.
    #[serde(default)]
    pub label: Option<String>,
    /// At most this many, newest first.
    #[serde(default)]
    pub limit: Option<usize>,
    /// A cursor: only tasks with a smaller id (the next page starts below the last id of
    /// the previous one).
    #[serde(default)]
    pub before: Option<u64>,
}

/// Which finished tasks `Clean` removes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CleanFilter {
    /// Only tasks that finished at least this long ago.
    #[serde(default)]
    pub older_than_ms: Option<u64>,
    /// Only tasks in these final states (all final states when empty).
    #[serde(default)]
    pub status: Vec<TaskStatus>,
    /// Only tasks with this label (and workflows with a step of it).
    #[serde(default)]
    pub label: Option<String>,
    /// Also remove whole workflows (their record, steps, compensations and logs) that are
    /// final, whose tasks are all final, and that finished at least `older_than_ms` ago.
    #[serde(default)]
    pub workflows: bool,
    /// At most this many records (tasks and workflows) in one removal (default and
    /// largest: [`MAX_CLEAN_BATCH`]); a client repeats the request while the answer is
    /// full.
    #[serde(default)]
    pub limit: Option<usize>,
}

/// The most records one `Clean` removes (one transaction).
pub const MAX_CLEAN_BATCH: usize = 10_000;
