//! Read views of a stored workflow: its summary (whose size does not grow with its
//! steps) and pages of its steps, as both the engine's answers and the read handlers give
//! them.

use super::graph;
use orch_protocol::{
    ErrorKind, ErrorReply, StatusCounts, StepStatus, TaskId, TaskStatus, Workflow, WorkflowId,
    WorkflowState, WorkflowSummary, WorkflowView,
};

/// The JSON a page of steps may take; a page holds at least one step.
const PAGE_BYTES: usize = 4 * 1024 * 1024;

/// How many steps a page lists when the request gives no limit.
const DEFAULT_PAGE_STEPS: usize = 1000;

/// A workflow's summary: its record without its steps, its state with at most
/// [`WorkflowSummary::MAX_FAILED_IDS`] failed step ids, and its tasks counted by status
/// (`status_of` gives `None` for a removed task).
pub fn workflow_summary(
    workflow: &Workflow,
    status_of: impl Fn(TaskId) -> Option<TaskStatus>,
) -> WorkflowSummary {
    let mut step_counts = StatusCounts::default();
    for step in &workflow.steps {
        step_counts.add(status_of(step.task));
    }
    let mut compensation_counts = StatusCounts::default();
    for compensation in &workflow.rollback_steps {
        compensation_counts.add(status_of(compensation.task));
    }
    WorkflowSummary {
        id: workflow.id,
        name: workflow.name.clone(),
        kind: workflow.kind,
        submitted_at: workflow.submitted_at,
        priority: workflow.priority,
        parallel_limit: workflow.parallel_limit,
        rollback_enabled: workflow.rollback_enabled,
        state: bounded_state(&workflow.state),
        last_event: workflow.last_event,
        steps: workflow.steps.len() as u64,
        step_counts,
        compensations: workflow.rollback_steps.len() as u64,
        compensation_counts,
        waves: workflow.waves,
    }
}

/// The state with its lists of failed steps cut to their first ids.
fn bounded_state(state: &WorkflowState) -> WorkflowState {
    let mut state = state.clone();
    if let WorkflowState::Failed { failed, .. } | WorkflowState::RollbackFailed { failed, .. } =
        &mut state
    {
        failed.truncate(WorkflowSummary::MAX_FAILED_IDS);
    }
    state
}

/// Workflow `workflow`'s summary with the page of its steps (then compensations) from
/// `offset`: at most `limit` of them, and no more than about [`PAGE_BYTES`] of JSON. Each
/// step carries its wave in the plan under the smaller of the workflow's and
/// `daemon_limit` parallel limits.
pub fn workflow_page(
    workflow: &Workflow,
    status_of: impl Fn(TaskId) -> Option<TaskStatus>,
    (offset, limit): (u64, Option<usize>),
    daemon_limit: usize,
) -> WorkflowView {
    let limit = limit.unwrap_or(DEFAULT_PAGE_STEPS);
    let total = workflow.steps.len() + workflow.rollback_steps.len();
    let start = usize::try_from(offset).unwrap_or(usize::MAX).min(total);
    let waves = planned_waves(workflow, daemon_limit);
    let mut tasks = Vec::new();
    let mut used = 0;
    let mut end = start;
    while end < total && tasks.len() < limit {
        let mut entry = step_entry(workflow, end, &status_of);
        entry.wave = waves.get(end).copied();
        used += serde_json::to_vec(&entry).map_or(0, |json| json.len() + 1);
        if used > PAGE_BYTES && !tasks.is_empty() {
            break;
        }
        tasks.push(entry);
        end += 1;
    }
    WorkflowView {
        workflow: workflow_summary(workflow, &status_of),
        offset: start as u64,
        tasks,
        next_offset: (end < total).then_some(end as u64),
        request: (start == 0).then(|| small_request(workflow)).flatten(),
    }
}

/// Entry `index` of a workflow's steps followed by its compensations.
fn step_entry(
    workflow: &Workflow,
    index: usize,
    status_of: impl Fn(TaskId) -> Option<TaskStatus>,
) -> StepStatus {
    match workflow.steps.get(index) {
        Some(step) => StepStatus {
            id: step.id.clone(),
            task: step.task,
            status: status_of(step.task),
            rollback: false,
            round: None,
            description: step.description.clone(),
            dependencies: step.dependencies.clone(),
            soft_dependencies: step.soft_dependencies.clone(),
            has_rollback: step.rollback.is_some(),
            wave: None,
        },
        None => {
            let compensation = &workflow.rollback_steps[index - workflow.steps.len()];
            StepStatus {
                id: compensation.step.clone(),
                task: compensation.task,
                status: status_of(compensation.task),
                rollback: true,
                round: Some(compensation.round),
                description: String::new(),
                dependencies: Vec::new(),
                soft_dependencies: Vec::new(),
                has_rollback: false,
                wave: None,
            }
        }
    }
}

/// The wave (from 1) of each of the workflow's steps in its plan, under the smaller of
/// its and `daemon_limit` parallel limits (empty if its steps do not form a graph, which
/// a stored workflow always does).
fn planned_waves(workflow: &Workflow, daemon_limit: usize) -> Vec<u32> {
    let limit = workflow
        .parallel_limit
        .map_or(daemon_limit, |l| (l as usize).min(daemon_limit));
    let Ok(deps) = graph::dependency_indexes(&workflow.steps) else {
        return Vec::new();
    };
    let mut waves = vec![0; workflow.steps.len()];
    for (n, wave) in graph::waves_of(&deps, limit).into_iter().enumerate() {
        for step in wave {
            waves[step] = u32::try_from(n + 1).unwrap_or(u32::MAX);
        }
    }
    waves
}

/// The workflow's request, when it is small enough to repeat in a view.
fn small_request(workflow: &Workflow) -> Option<serde_json::Value> {
    let size = serde_json::to_vec(&workflow.request).map_or(usize::MAX, |json| json.len());
    (size <= WorkflowView::MAX_REQUEST_BYTES).then(|| workflow.request.clone())
}

/// The error for an unknown workflow id.
pub fn no_such_workflow(id: WorkflowId) -> ErrorReply {
    ErrorReply::field(
        ErrorKind::NotFound,
        "id",
        format!("there is no workflow {id}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(id: &str, deps: &[&str], task: TaskId) -> orch_protocol::WorkflowStep {
        orch_protocol::WorkflowStep {
            id: id.into(),
            description: String::new(),
            task,
            dependencies: deps.iter().map(|d| d.to_string()).collect(),
            soft_dependencies: Vec::new(),
            rollback: None,
        }
    }

    #[test]
    fn each_step_of_a_page_carries_its_wave_in_the_plan_under_the_limits() {
        let mut workflow: Workflow = serde_json::from_value(serde_json::json!({
            "id": 1, "name": "w", "kind": "batch", "request": {},
            "submitted_at": "2026-12-06T00:00:00Z", "priority": 0,
            "rollback_enabled": false, "steps": [], "rollback_steps": [],
            "state": {"status": "running", "since": "2026-12-06T00:00:00Z"}, "last_event": 0
        }))
        .expect("a workflow");
        workflow.steps = vec![
            step("a", &[], 2),
            step("b", &[], 3),
            step("c", &[], 4),
            step("d", &["a", "b"], 5),
        ];
        let waves_of = |view: &WorkflowView| -> Vec<(String, Option<u32>)> {
            view.tasks.iter().map(|e| (e.id.clone(), e.wave)).collect()
        };
        let view = workflow_page(&workflow, |_| None, (0, None), 8);
        let wave = |id: &str, n| (id.to_string(), Some(n));
        assert_eq!(
            waves_of(&view),
            vec![wave("a", 1), wave("b", 1), wave("c", 1), wave("d", 2)]
        );
        // Two at a time: c waits for the second wave; a later page keeps the plan's waves.
        workflow.parallel_limit = Some(2);
        let page = workflow_page(&workflow, |_| None, (2, Some(2)), 8);
        assert_eq!(waves_of(&page), vec![wave("c", 2), wave("d", 2)]);
        let daemon_limited = workflow_page(&workflow, |_| None, (0, None), 1);
        assert_eq!(daemon_limited.tasks[3].wave, Some(4), "one at a time");
    }
}
