//! A workflow's parallel limit, on top of the global one: a ready step of a workflow
//! that has `parallel_limit` steps running is held back in a per-workflow queue, and the
//! held-back steps go back to the ready queue when one of its steps stops running.

use orch_protocol::{TaskId, TaskState};

use super::EngineState;

impl EngineState {
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
}
