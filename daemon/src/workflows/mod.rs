//! Workflows before they reach the engine: a request is expanded into steps
//! ([`expand`]), checked as a DAG and put in dependency order ([`graph`]), and either
//! planned (waves under the limits, and the rollback's waves) or handed to the engine,
//! which runs each step as a task.
//!
//! - [`infra`]: finding an infra in a workspace and reading its settings.
//! - [`names`]: the plain names and hostnames requests and settings may give.
//! - [`snippets`]: the Nushell code generated steps (and test environments) run.
//! - [`secrets`]: provider credentials as references, resolved by the step at run time.

mod expand;
pub mod graph;
mod infra;
pub mod names;
mod secrets;
pub mod snippets;
pub mod views;

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
/// limits, and the waves of a rollback of every step; big lists are cut to their first
/// items (the counts stay complete).
pub fn plan(draft: &Draft, daemon_limit: usize) -> WorkflowPlan {
    let limit = effective_limit(draft, daemon_limit);
    let deps = graph::dependency_indexes(&draft.steps).expect("a prepared draft is valid");
    let ids = |wave: Vec<usize>| -> Vec<String> {
        wave.into_iter()
            .map(|i| draft.steps[i].id.clone())
            .collect()
    };
    let waves: Vec<Vec<String>> = graph::waves_of(&deps, limit).into_iter().map(ids).collect();
    let rollback_waves: Vec<Vec<String>> = rollback_waves(draft, &deps, limit)
        .into_iter()
        .map(ids)
        .collect();
    let steps = draft.steps.iter().map(|s| PlannedStep {
        id: s.id.clone(),
        description: s.description.clone(),
        dependencies: s.dependencies.clone(),
        soft_dependencies: s.soft_dependencies.clone(),
        has_rollback: s.rollback.is_some(),
    });
    let (steps, steps_cut) = first_within(steps, WorkflowPlan::MAX_LISTED_BYTES);
    let (wave_count, rollback_wave_count) = (waves.len() as u64, rollback_waves.len() as u64);
    let (waves, waves_cut) = first_ids_within(waves);
    let (rollback_waves, rollback_cut) = first_ids_within(rollback_waves);
    WorkflowPlan {
        name: draft.name.clone(),
        kind: draft.kind,
        parallel_limit: limit as u32,
        step_count: draft.steps.len() as u64,
        steps,
        wave_count,
        waves,
        rollback_wave_count,
        rollback_waves,
        truncated: steps_cut || waves_cut || rollback_cut,
    }
}

/// How many waves a run of a checked draft goes through under its and the daemon's limits.
pub fn wave_count(draft: &Draft, daemon_limit: usize) -> u64 {
    let limit = effective_limit(draft, daemon_limit);
    graph::dependency_indexes(&draft.steps)
        .map_or(0, |deps| graph::waves_of(&deps, limit).len() as u64)
}

/// The smaller of the draft's and the daemon's parallel limits.
fn effective_limit(draft: &Draft, daemon_limit: usize) -> usize {
    draft
        .parallel_limit
        .map_or(daemon_limit, |l| (l as usize).min(daemon_limit))
        .max(1)
}

/// The waves (as step indexes) of a rollback of every compensated step.
fn rollback_waves(draft: &Draft, deps: &[Vec<usize>], limit: usize) -> Vec<Vec<usize>> {
    let compensated: Vec<bool> = draft.steps.iter().map(|s| s.rollback.is_some()).collect();
    let rollback_deps = graph::rollback_dependencies(deps, &compensated);
    // Only compensated steps take part in the rollback's waves.
    let members: Vec<usize> = (0..draft.steps.len()).filter(|&i| compensated[i]).collect();
    let position: std::collections::HashMap<usize, usize> =
        members.iter().enumerate().map(|(p, &i)| (i, p)).collect();
    let sub_deps: Vec<Vec<usize>> = members
        .iter()
        .map(|&i| rollback_deps[i].iter().map(|j| position[j]).collect())
        .collect();
    graph::waves_of(&sub_deps, limit)
        .into_iter()
        .map(|wave| wave.into_iter().map(|p| members[p]).collect())
        .collect()
}

/// The first items whose JSON adds up to at most about `budget` bytes, and whether any
/// were left out.
fn first_within<T: serde::Serialize>(
    items: impl ExactSizeIterator<Item = T>,
    budget: usize,
) -> (Vec<T>, bool) {
    let total = items.len();
    let mut used = 0;
    let mut kept = Vec::new();
    for item in items {
        used += serde_json::to_vec(&item).map_or(0, |json| json.len() + 1);
        if used > budget {
            break;
        }
        kept.push(item);
    }
    let cut = kept.len() < total;
    (kept, cut)
}

/// The first waves whose ids add up to at most about [`WorkflowPlan::MAX_LISTED_BYTES`]
/// (the last one kept may be cut short), and whether any id was left out.
fn first_ids_within(waves: Vec<Vec<String>>) -> (Vec<Vec<String>>, bool) {
    let mut budget = WorkflowPlan::MAX_LISTED_BYTES;
    let mut kept = Vec::new();
    for wave in waves {
        // A wave's brackets and separator.
        budget = budget.saturating_sub(3);
        let mut listed = Vec::with_capacity(wave.len());
        for id in wave {
            let cost = id.len() + 3;
            if cost > budget {
                if !listed.is_empty() {
                    kept.push(listed);
                }
                return (kept, true);
            }
            budget -= cost;
            listed.push(id);
        }
        kept.push(listed);
    }
    (kept, false)
}
