//! Workflows in the engine: each step is a task; the workflow's record follows its steps.
//!
//! Here are the requests on workflows (submit, cancel, rollback) and what a step's task
//! carries; how a workflow follows its steps (success, failure, rollback rounds) is in
//! `workflow_advance`, its parallel limit in `workflow_limits`.

use std::collections::HashMap;

use orch_protocol::{
    StepRef, TaskId, TaskSpec, TaskStatus, Workflow, WorkflowId, WorkflowState, WorkflowStatus,
    WorkflowStep, WorkflowSummary,
};

use super::{EngineState, Outcome, Reply, conflict};
use crate::engine::validate::validate;
use crate::workflows::Draft;
use crate::workflows::views::{no_such_workflow, workflow_summary};

impl EngineState {
    /// Creates a checked workflow and its step tasks in one batch; returns the outcome
    /// for the audit log.
    pub(super) fn submit_workflow(
        &mut self,
        mut draft: Draft,
        reply: Reply<WorkflowSummary>,
    ) -> Outcome {
        if let Some(error) = draft.restart_of.and_then(|id| self.restart_refusal(id)) {
            return self.refuse(reply, error);
        }
        if let Some(group) = &draft.group {
            if !self.controls.groups.contains_key(group) {
                let error = orch_protocol::ErrorReply::field(
                    orch_protocol::ErrorKind::BadRequest,
                    "group",
                    format!(
                        "the group {group:?} does not exist (`orch group add {group}` creates it)"
                    ),
                );
                return self.refuse(reply, error);
            }
            for step in &mut draft.steps {
                let specs = std::iter::once(&mut step.spec).chain(step.rollback.as_mut());
                specs.for_each(|spec| spec.group = Some(group.clone()));
            }
        }
        for (index, step) in draft.steps.iter().enumerate() {
            let checked = std::iter::once(&step.spec).chain(&step.rollback);
            if let Err(mut error) = checked
                .map(|spec| {
                    validate(spec, index)
                        .and_then(|()| self.placeable(spec, index))
                        .and_then(|()| self.grouped(spec, index))
                })
                .collect::<Result<Vec<_>, _>>()
            {
                error.message = format!("step `{}`: {}", step.id, error.message);
                return self.refuse(reply, error);
            }
        }
        let waves = crate::workflows::step_waves(&draft, self.nodes.capacity());
        let wave_count = waves.iter().copied().max().unwrap_or(0);
        let id = self.next_id;
        self.next_id += 1;
        let mut task_of: HashMap<String, TaskId> = HashMap::new();
        let mut steps = Vec::with_capacity(draft.steps.len());
        for (step, wave) in draft.steps.into_iter().zip(waves) {
            let resolve = |ids: &[String]| ids.iter().map(|s| task_of[s]).collect::<Vec<_>>();
            let mut spec = step_spec(
                step.spec,
                id,
                &step.id,
                false,
                draft.priority,
                step.fill_workflow_id,
            );
            spec.after = resolve(&step.dependencies);
            spec.soft_after = resolve(&step.soft_dependencies);
            let rollback = step
                .rollback
                .map(|r| step_spec(r, id, &step.id, true, draft.priority, step.fill_workflow_id));
            let task = self.create_task(spec, false);
            task_of.insert(step.id.clone(), task);
            steps.push(WorkflowStep {
                id: step.id,
                description: step.description,
                task,
                dependencies: step.dependencies,
                soft_dependencies: step.soft_dependencies,
                rollback,
                wave: Some(wave),
            });
        }
        let count = steps.len();
        let workflow = Workflow {
            id,
            name: draft.name,
            kind: draft.kind,
            request: draft.request,
            submitted_at: self.now,
            priority: draft.priority,
            parallel_limit: draft.parallel_limit,
            rollback_enabled: draft.rollback_enabled,
            steps,
            rollback_steps: Vec::new(),
            state: WorkflowState::Running { since: self.now },
            last_event: 0,
            waves: Some(u64::from(wave_count)),
        };
        let name = workflow.name.clone();
        self.workflows.insert(id, workflow);
        self.set_workflow_state(id, None, Some(format!("{count} steps")));
        self.answer_summary(id, reply);
        Ok(format!("workflow {id} ({name}): {count} steps"))
    }

    /// Cancels every unfinished task of a workflow; returns the outcome for the audit log.
    pub(super) fn cancel_workflow(
        &mut self,
        id: WorkflowId,
        reply: Reply<WorkflowSummary>,
    ) -> Outcome {
        let Some(workflow) = self.workflows.get(&id) else {
            return self.refuse(reply, no_such_workflow(id));
        };
        let status = workflow.state.status();
        if status.is_final() {
            let error = conflict(format!(
                "workflow {id} is already {}; there is nothing to cancel",
                status.as_str()
            ));
            return self.refuse(reply, error);
        }
        self.stop_workflow_tasks(id);
        let state = WorkflowState::Cancelled { at: self.now };
        self.set_workflow_state(id, Some(state), Some("cancelled on request".into()));
        self.answer_summary(id, reply);
        Ok(format!("workflow {id} cancelled"))
    }

    /// Starts a rollback of a finished workflow; returns the outcome for the audit log.
    pub(super) fn rollback_workflow(
        &mut self,
        id: WorkflowId,
        reply: Reply<WorkflowSummary>,
    ) -> Outcome {
        let Some(workflow) = self.workflows.get(&id) else {
            return self.refuse(reply, no_such_workflow(id));
        };
        let status = workflow.state.status();
        if !status.is_final() || status == WorkflowStatus::RolledBack {
            let error = conflict(format!(
                "workflow {id} is {}; only a succeeded, failed, cancelled or rollback_failed workflow can be rolled back",
                status.as_str()
            ));
            return self.refuse(reply, error);
        }
        let round = next_round(workflow);
        let state = WorkflowState::RollingBack {
            since: self.now,
            reason: "rollback requested".into(),
            round,
            started: false,
        };
        self.set_workflow_state(id, Some(state), Some("rollback requested".into()));
        self.advance_workflow(id);
        self.answer_summary(id, reply);
        Ok(format!("workflow {id}: rollback {round} started"))
    }

    /// Every task of the workflow: steps and compensations of every round.
    pub(super) fn workflow_tasks(&self, id: WorkflowId) -> Vec<TaskId> {
        let workflow = &self.workflows[&id];
        let steps = workflow.steps.iter().map(|s| s.task);
        steps
            .chain(workflow.rollback_steps.iter().map(|r| r.task))
            .collect()
    }

    pub(super) fn all_final(&self, tasks: Vec<TaskId>) -> bool {
        tasks
            .into_iter()
            .all(|t| self.status(t).is_none_or(TaskStatus::is_final))
    }

    pub(super) fn status(&self, task: TaskId) -> Option<TaskStatus> {
        self.tasks.get(&task).map(|t| t.state.status())
    }

    /// Answers `reply` with workflow `id`'s summary once this step is durable.
    fn answer_summary(&mut self, id: WorkflowId, reply: Reply<WorkflowSummary>) {
        let view = self.workflow_summary(id);
        self.answer(reply, Ok(view));
    }

    /// The workflow's summary, with its tasks' status as the engine knows them.
    pub(super) fn workflow_summary(&self, id: WorkflowId) -> WorkflowSummary {
        workflow_summary(&self.workflows[&id], |t| self.status(t))
    }

    /// A step of a workflow finished: its workflow may move on.
    pub(super) fn note_step_finished(&mut self, task: TaskId) {
        if let Some(step) = &self.tasks[&task].spec.workflow {
            self.touched_workflows.insert(step.workflow);
        }
    }
}

/// The round a new rollback of `workflow` gets.
pub(super) fn next_round(workflow: &Workflow) -> u32 {
    workflow
        .rollback_steps
        .iter()
        .map(|r| r.round)
        .max()
        .unwrap_or(0)
        + 1
}

impl EngineState {
    /// Why a restart of workflow `id` may not go on, now that the engine handles it: the
    /// workflow was checked as finished when the restart was read from the store, but a
    /// rollback asked for meanwhile would undo the steps the restart takes as done.
    fn restart_refusal(&self, id: WorkflowId) -> Option<orch_protocol::ErrorReply> {
        let status = self.workflows.get(&id)?.state.status();
        let undone = matches!(
            status,
            WorkflowStatus::RollingBack
                | WorkflowStatus::RolledBack
                | WorkflowStatus::RollbackFailed
                | WorkflowStatus::Running
        );
        undone.then(|| {
            conflict(format!(
                "workflow {id} is {} now: it can no longer be restarted from its steps",
                status.as_str()
            ))
        })
    }
}

/// A step's task spec: tagged with its workflow and step, at the workflow's priority,
/// with the workflow's id in its environment (and in its context when it has one).
fn step_spec(
    mut spec: TaskSpec,
    workflow: WorkflowId,
    step: &str,
    rollback: bool,
    priority: i32,
    fill_workflow_id: bool,
) -> TaskSpec {
    spec.priority = priority;
    spec.workflow = Some(StepRef {
        workflow,
        step: step.to_string(),
        rollback,
    });
    spec.env
        .insert("ORCH_WORKFLOW_ID".into(), workflow.to_string());
    spec.env.insert("ORCH_STEP".into(), step.to_string());
    if fill_workflow_id && let Some(ctx) = spec.params.as_object_mut() {
        ctx.insert("workflow".into(), workflow.into());
    }
    spec
}
