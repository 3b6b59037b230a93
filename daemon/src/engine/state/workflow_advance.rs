//! How a workflow follows its steps. Every workflow transition is written in the same
//! batch as the task transition that caused it, so after a crash the record and its tasks
//! agree.
//!
//! A running workflow succeeds when every step did, and fails when all have finished and
//! some did not (independent branches go on; hard dependants are skipped). With rollback
//! enabled, a failed step stops the unfinished steps; once none runs, the compensations
//! of the completed steps are created as tasks (in reverse dependency order, through
//! uncompensated steps too, in one batch with the state that says so), and the workflow
//! ends rolled back, or rollback failed when a compensation did not succeed. Each rollback
//! is a round; a later one compensates only what is still not compensated. A rollback
//! interrupted by a crash goes on after the restart like any other tasks.

use std::collections::HashMap;

use orch_protocol::{EventKind, RollbackStep, TaskId, TaskStatus, WorkflowId, WorkflowState};

use super::workflows::next_round;
use super::{EngineState, StopReason};
use crate::workflows::graph;

impl EngineState {
    /// Moves every workflow whose tasks changed to its next state, until nothing changes.
    pub(super) fn advance_workflows(&mut self) {
        while let Some(id) = self.touched_workflows.pop_first() {
            self.advance_workflow(id);
        }
    }

    pub(super) fn advance_workflow(&mut self, id: WorkflowId) {
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
                since: self.now,
                reason: reason.clone(),
                round,
                started: false,
            };
            self.set_workflow_state(id, Some(state), Some(reason));
            self.advance_workflow(id);
        } else if all_final {
            let now = self.now;
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
            let task = self.create_task(spec, false);
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
        let finished_at = self.now;
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
    pub(super) fn stop_workflow_tasks(&mut self, id: WorkflowId) {
        for task in self.workflow_tasks(id) {
            let Some(status) = self.status(task) else {
                continue;
            };
            if status.is_final() {
                continue;
            }
            if self.running.contains_key(&task) {
                self.stop(task, StopReason::Cancel);
            } else {
                self.cancel_waiting(task);
            }
        }
    }

    /// Records a workflow's new state (or, with `None`, its changed record) in the batch,
    /// with an event.
    pub(super) fn set_workflow_state(
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
        self.step.batch.workflows.push(workflow.clone());
        self.log_workflow_event(id, EventKind::Workflow { status, message });
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
