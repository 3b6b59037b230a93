//! Workflows before they reach the engine: a request is expanded into steps
//! ([`expand`]), checked as a DAG and put in dependency order ([`graph`]), and either
//! planned (waves under the limits, and the rollback's waves) or handed to the engine,
//! which runs each step as a task.
//!
//! - [`infra`]: finding an infra in a workspace and reading its settings.
//! - [`names`]: the plain names and hostnames requests and settings may give.
//! - [`snippets`]: the Nushell code generated steps (and test environments) run.

mod expand;
pub mod graph;
mod infra;
pub mod names;
pub mod snippets;

use orch_protocol::{PlannedStep, TaskSpec, WorkflowKind, WorkflowPlan, WorkflowRequest};

pub use expand::{Sources, install_order};

/// The most steps one workflow may have.
pub const MAX_STEPS: usize = 100_000;

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
    /// Whether a failure starts a rollback.
    pub rollback_enabled: bool,
    /// Its steps, dependencies first.
    pub steps: Vec<DraftStep>,
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
pub fn prepare(request: &WorkflowRequest, sources: &Sources) -> Result<Draft, String> {
    let mut draft = expand::expand(request, sources)?;
    if draft.steps.is_empty() {
        return Err(format!("workflow `{}` has no steps", draft.name));
    }
    if draft.steps.len() > MAX_STEPS {
        return Err(format!(
            "workflow `{}` has {} steps; the limit is {MAX_STEPS}",
            draft.name,
            draft.steps.len()
        ));
    }
    if draft.parallel_limit == Some(0) {
        return Err("`parallel_limit` must be at least 1".into());
    }
    let order = graph::topological_order(&draft.steps)?;
    let mut slots: Vec<Option<DraftStep>> = draft.steps.drain(..).map(Some).collect();
    draft.steps = order
        .into_iter()
        .map(|i| slots[i].take().expect("each index once"))
        .collect();
    Ok(draft)
}

/// The plan of a checked draft: its waves under the smaller of its and the daemon's
/// limits, and the waves of a rollback of every step.
pub fn plan(draft: &Draft, daemon_limit: usize) -> WorkflowPlan {
    let limit = draft
        .parallel_limit
        .map_or(daemon_limit, |l| (l as usize).min(daemon_limit))
        .max(1);
    let deps = graph::dependency_indexes(&draft.steps).expect("a prepared draft is valid");
    let ids = |wave: Vec<usize>| -> Vec<String> {
        wave.into_iter()
            .map(|i| draft.steps[i].id.clone())
            .collect()
    };
    let waves = graph::waves_of(&deps, limit).into_iter().map(ids).collect();
    let compensated: Vec<bool> = draft.steps.iter().map(|s| s.rollback.is_some()).collect();
    let rollback_deps = graph::rollback_dependencies(&deps, &compensated);
    // Only compensated steps take part in the rollback's waves.
    let members: Vec<usize> = (0..draft.steps.len()).filter(|&i| compensated[i]).collect();
    let position: std::collections::HashMap<usize, usize> =
        members.iter().enumerate().map(|(p, &i)| (i, p)).collect();
    let sub_deps: Vec<Vec<usize>> = members
        .iter()
        .map(|&i| rollback_deps[i].iter().map(|j| position[j]).collect())
        .collect();
    let rollback_waves = graph::waves_of(&sub_deps, limit)
        .into_iter()
        .map(|wave| ids(wave.into_iter().map(|p| members[p]).collect()))
        .collect();
    WorkflowPlan {
        name: draft.name.clone(),
        kind: draft.kind,
        parallel_limit: limit as u32,
        steps: draft
            .steps
            .iter()
            .map(|s| PlannedStep {
                id: s.id.clone(),
                description: s.description.clone(),
                dependencies: s.dependencies.clone(),
                soft_dependencies: s.soft_dependencies.clone(),
                has_rollback: s.rollback.is_some(),
            })
            .collect(),
        waves,
        rollback_waves,
    }
}
