//! Read views of a stored workflow: its summary (whose size does not grow with its
//! steps) and pages of its steps, as both the engine's answers and the read handlers give
//! them.

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
/// `offset`: at most `limit` of them, and no more than about [`PAGE_BYTES`] of JSON.
pub fn workflow_page(
    workflow: &Workflow,
    status_of: impl Fn(TaskId) -> Option<TaskStatus>,
    offset: u64,
    limit: Option<usize>,
) -> WorkflowView {
    let limit = limit.unwrap_or(DEFAULT_PAGE_STEPS);
    let total = workflow.steps.len() + workflow.rollback_steps.len();
    let start = usize::try_from(offset).unwrap_or(usize::MAX).min(total);
    let mut tasks = Vec::new();
    let mut used = 0;
    let mut end = start;
    while end < total && tasks.len() < limit {
        let entry = step_entry(workflow, end, &status_of);
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
            wave: step.wave,
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
