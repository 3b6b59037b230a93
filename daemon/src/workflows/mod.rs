//! Workflows before they reach the engine: a request is expanded into steps
//! ([`expand`]), checked as a DAG and put in dependency order ([`graph`]), and either
//! planned ([`plan()`]: waves under the limits, and the rollback's waves) or handed to the
//! engine, which runs each step as a task.
//!
//! - [`checks`]: the size of a workflow, counted before its steps are built, and the
//!   checks of a built draft.
//! - [`error`]: why a request cannot be expanded ([`ExpandError`]) and how it is answered.
//! - [`infra`]: finding an infra in a workspace and reading its settings.
//! - [`taskservs`]: the taskservs a request brings, in install order.
//! - [`names`]: the plain names and hostnames requests and settings may give.
//! - [`snippets`]: the Nushell code generated steps (and test environments) run.
//! - [`secrets`]: provider credentials as references, resolved by the step at run time.
//! - [`restart`]: a finished workflow's steps from one of them on, as a new draft.

mod checks;
mod error;
mod expand;
pub mod graph;
mod infra;
pub mod names;
mod plan;
pub mod restart;
mod secrets;
pub mod snippets;
mod taskservs;
pub mod views;

use orch_protocol::{TaskSpec, WorkflowKind, WorkflowRequest};

pub use error::ExpandError;
pub use expand::Sources;
pub use plan::{plan, step_waves};
pub use taskservs::install_order;

/// A workflow ready for the engine: its steps in dependency order.
#[derive(Debug, Clone)]
pub struct Draft {
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: WorkflowKind,
    /// The request, as submitted.
    pub request: serde_json::Value,
    /// Queue priority of its steps.
    pub priority: i32,
    /// How many of its tasks may run at once.
    pub parallel_limit: Option<u32>,
    /// The group its tasks run in (none: the default group).
    pub group: Option<String>,
    /// Whether a failure starts a rollback.
    pub rollback_enabled: bool,
    /// Its steps, dependencies first.
    pub steps: Vec<DraftStep>,
    /// The finished workflow it restarts from one of its steps (none: a new request).
    pub restart_of: Option<orch_protocol::WorkflowId>,
}

/// One step of a [`Draft`].
#[derive(Debug, Clone)]
pub struct DraftStep {
    /// Its id.
    pub id: String,
    /// What it does.
    pub description: String,
    /// The task that runs it (dependencies are filled in by the engine).
    pub spec: TaskSpec,
    /// Hard dependencies (step ids).
    pub dependencies: Vec<String>,
    /// Soft dependencies (step ids).
    pub soft_dependencies: Vec<String>,
    /// Its compensation.
    pub rollback: Option<TaskSpec>,
    /// Whether the engine writes the workflow's id into the step context
    /// (`$params.workflow`) of the step and of its compensation.
    pub fill_workflow_id: bool,
}

/// A stored step is a node of its workflow's graph, as its draft was.
impl graph::Node for orch_protocol::WorkflowStep {
    fn id(&self) -> &str {
        &self.id
    }
    fn hard(&self) -> &[String] {
        &self.dependencies
    }
    fn soft(&self) -> &[String] {
        &self.soft_dependencies
    }
}

impl graph::Node for DraftStep {
    fn id(&self) -> &str {
        &self.id
    }
    fn hard(&self) -> &[String] {
        &self.dependencies
    }
    fn soft(&self) -> &[String] {
        &self.soft_dependencies
    }
}

/// Expands and checks a request: unknown names and cycles are errors that name them.
pub fn prepare(request: &WorkflowRequest, sources: &Sources) -> Result<Draft, ExpandError> {
    let mut draft = expand::expand(request, sources)?;
    checks::draft(&draft)?;
    let order = graph::topological_order(&draft.steps)?;
    let mut slots: Vec<Option<DraftStep>> = draft.steps.drain(..).map(Some).collect();
    draft.steps = order
        .into_iter()
        .map(|i| slots[i].take().expect("each index once"))
        .collect();
    Ok(draft)
}
