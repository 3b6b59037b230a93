//! Rebuilding the engine after a restart.
//!
//! Queued tasks go back in the queue, blocked ones wait on their dependencies again,
//! retry timers are re-armed. An attempt that was running when the daemon died and that
//! the runner took over (its supervisor still runs, or recorded its outcome: see
//! [`running_attempts`]) stays running, and its outcome arrives as a report. Any other is
//! recorded as interrupted and follows the task's retry policy (the driver stops the
//! processes it left running first). An interrupted workflow step is queued again without
//! using a retry (steps are idempotent, and the crash was not the step's fault), so a
//! workflow goes on from where it stopped. Succeeded tasks are left alone, so they never
//! run again. Only live work is read back: queued tasks outside workflows come as ids and
//! priorities (their records stay in the store until they start) and finished ones outside
//! workflows not at all.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use orch_protocol::{AttemptOutcome, StepRef, TaskId, TaskState, Workflow, WorkflowState};

use super::{EngineState, NodeName, Nodes, Records, Running};
use crate::engine::effects::Step;
use crate::store::Snapshot;

/// The attempts that were running when the last daemon stopped, in the store's order:
/// the runner takes over those still under a supervisor, and the processes the others
/// left must be stopped before the engine recovers them.
pub fn running_attempts(snapshot: &Snapshot) -> Vec<(TaskId, u32)> {
    snapshot
        .tasks
        .iter()
        .filter_map(|t| match t.state {
            TaskState::Running { attempt, .. } => Some((t.id, attempt)),
            _ => None,
        })
        .collect()
}

impl EngineState {
    /// The engine rebuilt from `snapshot` at `now`, and the step recording the recovery
    /// (interrupted attempts settled, retry timers re-armed), to commit before anything
    /// else happens. The running attempts of the tasks in `adopted` go on running.
    pub fn recover(
        snapshot: Snapshot,
        records: Box<dyn Records>,
        nodes: Nodes,
        now: DateTime<Utc>,
        adopted: &HashMap<TaskId, NodeName>,
    ) -> (EngineState, Step) {
        let next_seq = snapshot.last_event_seq + 1;
        let mut state = EngineState::empty(records, nodes, next_seq, now);
        state.controls = snapshot.controls;
        // The default group always exists (a stored record without it gets it back).
        let default = orch_protocol::DEFAULT_GROUP.to_string();
        state.controls.groups.entry(default).or_default();
        state.recover_schedules(snapshot.schedules);
        state.recover_notifiers(snapshot.notifiers);
        let highest = snapshot
            .tasks
            .iter()
            .map(|t| t.id)
            .chain(snapshot.queue.iter().map(|(id, _)| *id))
            .chain(snapshot.workflows.iter().map(|w| w.id))
            .chain(snapshot.test_envs.iter().map(|e| e.id))
            .max()
            .unwrap_or(0);
        state.next_id = highest.max(snapshot.last_task_id) + 1;
        let (mut interrupted, mut resumed) = (Vec::new(), Vec::new());
        for task in snapshot.tasks {
            match &task.state {
                TaskState::Running { attempt, .. } if adopted.contains_key(&task.id) => {
                    resumed.push((task.id, *attempt, adopted[&task.id].clone()));
                }
                TaskState::Running { attempt, .. } => interrupted.push((task.id, *attempt)),
                TaskState::RetryWaiting {
                    retry_at,
                    next_attempt,
                } => state.arm_timer(task.id, *next_attempt, *retry_at),
                TaskState::Blocked { .. } | TaskState::Delayed { .. } => state.enter(&task),
                _ => {}
            }
            state.tasks.insert(task.id, task);
        }
        state.ready.reserve(snapshot.queue.len());
        state.cold.reserve(snapshot.queue.len());
        for (id, priority) in snapshot.queue {
            if !state.tasks.contains_key(&id) {
                state.cold.insert(id, priority);
            }
            state.ready.push(priority, id);
        }
        state.recover_workflows(snapshot.workflows);
        for (id, attempt, node) in resumed {
            state.resume(id, attempt, node);
        }
        for (id, attempt) in interrupted {
            state.interrupted(id, attempt);
        }
        state.advance_workflows();
        state.queue_notifications();
        state.step.effects.settled = state.close_step();
        let step = std::mem::take(&mut state.step);
        (state, step)
    }

    /// Counts attempt `attempt` of `id`, taken over by the runner on `node`, as running
    /// (with its workflow's and its node's slots); its outcome comes as a report.
    fn resume(&mut self, id: TaskId, attempt: u32, node: NodeName) {
        self.nodes.take(&node);
        let task = &self.tasks[&id];
        let group = self.group_of(&task.spec);
        if let TaskState::Running { paused_at, .. } = task.state {
            // Said either way: a resume committed just before the stop may not have
            // reached its processes (the adopted steering passes the first value on).
            self.step
                .effects
                .pauses
                .push((id, attempt, paused_at.is_some()));
        }
        self.group_started(&group);
        let stop = None;
        self.running.insert(
            id,
            Running {
                attempt,
                stop,
                node,
                group,
                input_closed: false,
            },
        );
        if let Some(step) = &self.tasks[&id].spec.workflow {
            *self.workflow_running.entry(step.workflow).or_default() += 1;
        }
    }

    /// Settles attempt `attempt` of `id`, which a daemon stop (or the loss of its node)
    /// interrupted.
    pub(super) fn interrupted(&mut self, id: TaskId, attempt: u32) {
        tracing::warn!(task = id, attempt, "attempt interrupted by a daemon stop");
        self.finish_attempt(id, AttemptOutcome::Interrupted);
        match self.tasks[&id].spec.workflow.clone() {
            Some(step) if self.workflow_still_wants(&step) => {
                // Not counted: the crash was not the step's fault.
                self.tasks
                    .get_mut(&id)
                    .expect("known task")
                    .attempts_before_retry += 1;
                self.enqueue(id);
            }
            // Its workflow was cancelled or is rolling back: it was being stopped.
            Some(_) => self.cancel_waiting(id),
            None => self.settle_attempt(id, attempt, AttemptOutcome::Interrupted),
        }
    }

    /// Whether the workflow still wants this step or compensation to run (after a
    /// restart): a step while the workflow runs, a compensation of the current rollback.
    fn workflow_still_wants(&self, step: &StepRef) -> bool {
        match self.workflows.get(&step.workflow).map(|w| &w.state) {
            Some(WorkflowState::Running { .. }) => !step.rollback,
            Some(WorkflowState::RollingBack { started: true, .. }) => step.rollback,
            _ => false,
        }
    }

    /// Rebuilds the workflows; each unfinished one is looked at again once the
    /// interrupted tasks are settled.
    fn recover_workflows(&mut self, workflows: Vec<Workflow>) {
        for workflow in workflows {
            if !workflow.state.status().is_final() {
                self.touched_workflows.insert(workflow.id);
            }
            self.workflows.insert(workflow.id, workflow);
        }
    }
}
