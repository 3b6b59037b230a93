//! Workflows: requests that expand into a DAG of steps, their durable record, their plan.
//!
//! A workflow's id comes from the same sequence as task ids, so an id names either a
//! task or a workflow, never both. Each step runs as a task that carries a [`StepRef`].
//!
//! - [`request`]: the servers, taskserv and cluster requests and [`WorkflowRequest`].
//! - [`batch`]: batch workflow definitions and their operations.
//! - `fields`: how request fields are read (bounded lists, flattened fields named in errors).
//! - [`record`]: the stored workflow and its state.
//! - [`view`]: summaries and pages of steps, for answers.
//! - [`plan`]: plans and the answer to a submission.

pub mod batch;
mod fields;
pub mod plan;
pub mod record;
pub mod request;
pub mod view;

use serde::{Deserialize, Serialize};

pub use batch::*;
pub use fields::MAX_LIST_LEN;
pub use plan::*;
pub use record::*;
pub use request::*;
pub use view::*;

pub use crate::ids::WorkflowId;

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
