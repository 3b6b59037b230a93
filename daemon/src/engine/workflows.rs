//! Workflows in the engine: each step is a task; the workflow's record follows its steps.
//!
//! Every workflow transition is written in the same batch as the task transition that
//! caused it, so after a crash the record and its tasks agree. A failed step of a
//! workflow with rollback enabled stops the unfinished steps; once none runs, the
//! compensations of the completed steps are created as tasks (in reverse dependency
//! order, in one batch with the state that says so), and the workflow ends rolled back or
//! rollback failed when they are done. A rollback interrupted by a crash goes on after
//! the restart like any other tasks.

use std::collections::HashMap;

use chrono::Utc;
use orch_protocol::{
    ErrorKind, ErrorReply, EventKind, RollbackStep, StepRef, TaskId, TaskSpec, TaskState,
    TaskStatus, Workflow, WorkflowId, WorkflowState, WorkflowStatus, WorkflowStep, WorkflowSummary,
};

use super::transitions::validate;
use super::{Engine, Outcome, Reply, StopReason};
use crate::workflows::views::{no_such_workflow, workflow_summary};
use crate::workflows::{Draft, graph};

impl Engine {
    /// Creates a checked workflow and its step tasks in one batch; returns the outcome
    /// for the audit log.
    pub(super) fn submit_workflow(
        &mut self,
        draft: Draft,
        reply: Reply<WorkflowSummary>,
    ) -> Outcome {
        for (index, step) in draft.steps.iter().enumerate() {
            let checked = std::iter::once(&step.spec).chain(&step.rollback);
            if let Err(mut error) = checked
                .map(|spec| validate(spec, index))
                .collect::<Result<Vec<_>, _>>()
            {
                error.message = format!("step `{}`: {}", step.id, error.message);
                return self.refuse(reply, error);
            }
        }
        let waves = crate::workflows::wave_count(&draft, self.parallel_limit);
        let id = self.next_id;
        self.next_id += 1;
        let mut task_of: HashMap<String, TaskId> = HashMap::new();
        let mut steps = Vec::with_capacity(draft.steps.len());
        for step in draft.steps {
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
            let task = self.create_task(spec);
            task_of.insert(step.id.clone(), task);
            steps.push(WorkflowStep {
                id: step.id,
                description: step.description,
                task,
                dependencies: step.dependencies,
                soft_dependencies: step.soft_dependencies,
                rollback,
            });
        }
        let count = steps.len();
        let workflow = Workflow {
            id,
            name: draft.name,
            kind: draft.kind,
            request: draft.request,
            submitted_at: Utc::now(),
            priority: draft.priority,
            parallel_limit: draft.parallel_limit,
            rollback_enabled: draft.rollback_enabled,
            steps,
            rollback_steps: Vec::new(),
            state: WorkflowState::Running { since: Utc::now() },
            last_event: 0,
            waves: Some(waves),
        };
        let name = workflow.name.clone();
        self.workflows.insert(id, workflow);
        self.set_workflow_state(id, None, Some(format!("{count} steps")));
        let view = self.workflow_summary(id);
        self.after_commit(move |result| {
            let _ = reply.send(result.map(|()| view).map_err(super::transitions::internal));
        });
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
            let error = ErrorReply::field(
                ErrorKind::Conflict,
                "id",
                format!(
                    "workflow {id} is already {}; there is nothing to cancel",
                    status.as_str()
                ),
            );
            return self.refuse(reply, error);
        }
        self.stop_workflow_tasks(id);
        let state = WorkflowState::Cancelled { at: Utc::now() };
        self.set_workflow_state(id, Some(state), Some("cancelled on request".into()));
        let view = self.workflow_summary(id);
        self.after_commit(move |result| {
            let _ = reply.send(result.map(|()| view).map_err(super::transitions::internal));
        });
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
            let error = ErrorReply::field(
                ErrorKind::Conflict,
                "id",
                format!(
                    "workflow {id} is {}; only a succeeded, failed, cancelled or rollback_failed workflow can be rolled back",
                    status.as_str()
                ),
            );
            return self.refuse(reply, error);
        }
        let round = next_round(workflow);
        let state = WorkflowState::RollingBack {
            since: Utc::now(),
            reason: "rollback requested".into(),
            round,
            started: false,
        };
        self.set_workflow_state(id, Some(state), Some("rollback requested".into()));
        self.advance_workflow(id);
        let view = self.workflow_summary(id);
        self.after_commit(move |result| {
            let _ = reply.send(result.map(|()| view).map_err(super::transitions::internal));
        });
        Ok(format!("workflow {id}: rollback {round} started"))
    }

    /// Moves every workflow whose tasks changed to its next state, until nothing changes.
    pub(super) fn advance_workflows(&mut self) {
        while let Some(id) = self.touched_workflows.pop_first() {
            self.advance_workflow(id);
        }
    }

    fn advance_workflow(&mut self, id: WorkflowId) {
        let Some(workflow) = self.workflows.get(&id) else {
            return;
        };
        match workflow.state.clone() {
            WorkflowState::Running { .. } => self.advance_running(id),
            WorkflowState::RollingBack {
                started: false,
                round,
                ..
            } if self.all_final(self.workflow_tasks(id)) => self.start_rollback(id, round),
            WorkflowState::RollingBack {
                started: true,
                round,
                reason,
                ..
            } => {
                self.finish_rollback(id, round, reason);
            }
            _ => {}
        }
    }

    fn advance_running(&mut self, id: WorkflowId) {
        let workflow = &self.workflows[&id];
        let mut failed = Vec::new();
        let mut unsuccessful = Vec::new();
        let mut all_final = true;
        for step in &workflow.steps {
            match self.tasks.get(&step.task).map(|t| t.state.status()) {
                Some(TaskStatus::Succeeded) => {}
                Some(s) if s.is_final() => {
                    unsuccessful.push(step.id.clone());
                    if matches!(s, TaskStatus::Failed | TaskStatus::Cancelled) {
                        failed.push(step.id.clone());
                    }
                }
                _ => all_final = false,
            }
        }
        if !failed.is_empty() && workflow.rollback_enabled {
            let reason = format!("step {} failed", some_ids(&failed));
            let round = next_round(workflow);
            self.stop_workflow_tasks(id);
            let state = WorkflowState::RollingBack {
                since: Utc::now(),
                reason: reason.clone(),
                round,
                started: false,
            };
            self.set_workflow_state(id, Some(state), Some(reason));
            self.advance_workflow(id);
        } else if all_final {
            let now = Utc::now();
            let (state, message) = if unsuccessful.is_empty() {
                (WorkflowState::Succeeded { finished_at: now }, None)
            } else {
                let message = format!("did not succeed: {}", some_ids(&unsuccessful));
                (
                    WorkflowState::Failed {
                        finished_at: now,
                        failed: unsuccessful,
                    },
                    Some(message),
                )
            };
            self.set_workflow_state(id, Some(state), message);
        }
    }

    /// Creates the compensation tasks of round `round`: one per completed step with a
    /// compensation (not already compensated by an earlier round), each after the
    /// compensations of the steps that depended on it.
    fn start_rollback(&mut self, id: WorkflowId, round: u32) {
        let workflow = &self.workflows[&id];
        let deps =
            graph::dependency_indexes(&workflow.steps).expect("a stored workflow's graph is valid");
        let compensated_before: Vec<&str> = workflow
            .rollback_steps
            .iter()
            .filter(|r| self.status(r.task) == Some(TaskStatus::Succeeded))
            .map(|r| r.step.as_str())
            .collect();
        let compensate: Vec<bool> = workflow
            .steps
            .iter()
            .map(|s| {
                s.rollback.is_some()
                    && self.status(s.task) == Some(TaskStatus::Succeeded)
                    && !compensated_before.contains(&s.id.as_str())
            })
            .collect();
        let order = graph::rollback_dependencies(&deps, &compensate);
        let steps = workflow.steps.clone();
        let mut created: HashMap<usize, TaskId> = HashMap::new();
        // Dependants come later in a workflow's step order, so creating the compensations
        // from the last step back creates each one after those it waits for.
        for i in (0..steps.len()).rev().filter(|&i| compensate[i]) {
            let mut spec = steps[i].rollback.clone().expect("filtered above");
            spec.after = order[i].iter().map(|j| created[j]).collect();
            let task = self.create_task(spec);
            created.insert(i, task);
            let workflow = self.workflows.get_mut(&id).expect("known workflow");
            workflow.rollback_steps.push(RollbackStep {
                step: steps[i].id.clone(),
                task,
                round,
            });
        }
        let workflow = self.workflows.get_mut(&id).expect("known workflow");
        if let WorkflowState::RollingBack { started, .. } = &mut workflow.state {
            *started = true;
        }
        let message = format!("{} compensations", created.len());
        self.set_workflow_state(id, None, Some(message));
        self.advance_workflow(id);
    }

    fn finish_rollback(&mut self, id: WorkflowId, round: u32, reason: String) {
        let workflow = &self.workflows[&id];
        let tasks: Vec<(String, TaskId)> = workflow
            .rollback_steps
            .iter()
            .filter(|r| r.round == round)
            .map(|r| (r.step.clone(), r.task))
            .collect();
        if !self.all_final(tasks.iter().map(|(_, t)| *t).collect()) {
            return;
        }
        let failed: Vec<String> = tasks
            .into_iter()
            .filter(|(_, t)| self.status(*t) != Some(TaskStatus::Succeeded))
            .map(|(step, _)| step)
            .collect();
        let finished_at = Utc::now();
        let (state, message) = if failed.is_empty() {
            (
                WorkflowState::RolledBack {
                    finished_at,
                    reason,
                },
                None,
            )
        } else {
            let message = format!("compensation did not succeed: {}", some_ids(&failed));
            (
                WorkflowState::RollbackFailed {
                    finished_at,
                    failed,
                },
                Some(message),
            )
        };
        self.set_workflow_state(id, Some(state), message);
    }

    /// Cancels every unfinished task of the workflow (steps and compensations): waiting
    /// ones at once, running ones by stopping their process group.
    fn stop_workflow_tasks(&mut self, id: WorkflowId) {
        for task in self.workflow_tasks(id) {
            let Some(status) = self.status(task) else {
                continue;
            };
            if status.is_final() {
                continue;
            }
            if let Some(running) = self.running.get_mut(&task) {
                running.stop = Some(StopReason::Cancel);
                running.token.cancel();
            } else {
                self.cancel_waiting(task);
            }
        }
    }

    /// Records a workflow's new state (or, with `None`, its changed record) in the batch,
    /// with an event.
    fn set_workflow_state(
        &mut self,
        id: WorkflowId,
        state: Option<WorkflowState>,
        message: Option<String>,
    ) {
        let workflow = self.workflows.get_mut(&id).expect("known workflow");
        if let Some(state) = state {
            workflow.state = state;
        }
        let status = workflow.state.status();
        workflow.last_event = self.next_seq;
        self.pending.batch.workflows.push(workflow.clone());
        self.log_workflow_event(id, EventKind::Workflow { status, message });
    }

    /// Every task of the workflow: steps and compensations of every round.
    fn workflow_tasks(&self, id: WorkflowId) -> Vec<TaskId> {
        let workflow = &self.workflows[&id];
        let steps = workflow.steps.iter().map(|s| s.task);
        steps
            .chain(workflow.rollback_steps.iter().map(|r| r.task))
            .collect()
    }

    fn all_final(&self, tasks: Vec<TaskId>) -> bool {
        tasks
            .into_iter()
            .all(|t| self.status(t).is_none_or(TaskStatus::is_final))
    }

    fn status(&self, task: TaskId) -> Option<TaskStatus> {
        self.tasks.get(&task).map(|t| t.state.status())
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

    /// Whether `task` may start now under its workflow's parallel limit; counts it if so.
    pub(super) fn take_workflow_slot(&mut self, task: TaskId) -> bool {
        let Some(workflow) = self.tasks[&task].spec.workflow.as_ref().map(|s| s.workflow) else {
            return true;
        };
        let limit = self
            .workflows
            .get(&workflow)
            .and_then(|w| w.parallel_limit)
            .map_or(usize::MAX, |l| l as usize);
        let running = self.workflow_running.entry(workflow).or_default();
        if *running >= limit {
            let priority = self.tasks[&task].spec.priority;
            self.deferred
                .entry(workflow)
                .or_default()
                .push(priority, task);
            return false;
        }
        *running += 1;
        true
    }

    /// A task stopped running: its workflow's slot is free for the next deferred step.
    pub(super) fn release_workflow_slot(&mut self, task: TaskId) {
        let Some(workflow) = self.tasks[&task].spec.workflow.as_ref().map(|s| s.workflow) else {
            return;
        };
        if let Some(running) = self.workflow_running.get_mut(&workflow) {
            *running = running.saturating_sub(1);
        }
        // Every held-back step goes back to the ready queue; `dispatch` holds back again
        // those beyond the limit. (Releasing only one could lose the wake-up if that one
        // were cancelled before it started.)
        let Some(mut deferred) = self.deferred.remove(&workflow) else {
            return;
        };
        while let Some(next) = deferred.pop() {
            if let Some(task) = self.tasks.get(&next)
                && matches!(task.state, TaskState::Queued { .. })
            {
                self.ready.push(task.spec.priority, next);
            }
        }
    }

    /// Whether the workflow still wants this step or compensation to run (after a
    /// restart): a step while the workflow runs, a compensation of the current rollback.
    pub(super) fn workflow_still_wants(&self, step: &StepRef) -> bool {
        match self.workflows.get(&step.workflow).map(|w| &w.state) {
            Some(WorkflowState::Running { .. }) => !step.rollback,
            Some(WorkflowState::RollingBack { started: true, .. }) => step.rollback,
            _ => false,
        }
    }

    /// Rebuilds the workflows after a restart; each unfinished one is looked at again
    /// once the interrupted tasks are settled.
    pub(super) fn recover_workflows(&mut self, workflows: Vec<Workflow>) {
        for workflow in workflows {
            if !workflow.state.status().is_final() {
                self.touched_workflows.insert(workflow.id);
            }
            self.workflows.insert(workflow.id, workflow);
        }
    }
}

/// Step ids for a message: the first few, then how many more (a message stays short
/// whatever the number of steps).
fn some_ids(ids: &[String]) -> String {
    const SHOWN: usize = 10;
    let listed = ids[..ids.len().min(SHOWN)].join(", ");
    match ids.len().saturating_sub(SHOWN) {
        0 => listed,
        more => format!("{listed} and {more} more"),
    }
}

/// The round a new rollback of `workflow` gets.
fn next_round(workflow: &Workflow) -> u32 {
    workflow
        .rollback_steps
        .iter()
        .map(|r| r.round)
        .max()
        .unwrap_or(0)
        + 1
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

impl graph::Node for WorkflowStep {
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
