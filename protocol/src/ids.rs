//! The identifiers the daemon assigns. Tasks, workflows and test environments draw from
//! one increasing sequence, so an id names one thing only.

/// Identifier of a task: assigned by the daemon, increasing in submission order.
pub type TaskId = u64;

/// Identifier of a workflow (from the same sequence as task ids).
pub type WorkflowId = u64;

/// Identifier of a test environment (from the same sequence as task ids).
pub type EnvId = u64;
