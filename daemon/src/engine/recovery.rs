//! Rebuilding the engine after a restart.
//!
//! Queued tasks go back in the queue, blocked ones wait on their dependencies again,
//! retry timers are re-armed, and an attempt that was running when the daemon died is
//! recorded as interrupted and follows the task's retry policy, once the processes it left
//! running are stopped. An interrupted workflow step is queued again without using a
//! retry (steps are idempotent, and the crash was not the step's fault), so a workflow
//! goes on from where it stopped. Succeeded tasks are left alone, so they never run again.

use std::time::Duration;

use chrono::Utc;
use orch_protocol::{AttemptOutcome, EventKind, TaskId, TaskState};

use super::Engine;
use crate::store::Snapshot;

impl Engine {
    pub(super) fn recover(&mut self, snapshot: Snapshot) {
        let highest = snapshot
            .tasks
            .iter()
            .map(|t| t.id)
            .chain(snapshot.workflows.iter().map(|w| w.id))
            .chain(snapshot.test_envs.iter().map(|e| e.id))
            .max()
            .unwrap_or(0);
        self.next_id = highest.max(snapshot.last_task_id) + 1;
        let mut interrupted = Vec::new();
        for task in snapshot.tasks {
            match &task.state {
                TaskState::Running { attempt, .. } => interrupted.push((task.id, *attempt)),
                TaskState::RetryWaiting {
                    retry_at,
                    next_attempt,
                } => {
                    let delay = (*retry_at - Utc::now()).to_std().unwrap_or(Duration::ZERO);
                    self.pending.timers.push((task.id, *next_attempt, delay));
                }
                TaskState::Blocked { .. } => self.enter(&task),
                _ => {}
            }
            self.tasks.insert(task.id, task);
        }
        for id in snapshot.queue {
            if let Some(task) = self.tasks.get(&id) {
                self.ready.push(task.spec.priority, id);
            }
        }
        let ids = interrupted.iter().map(|(id, _)| *id).collect();
        crate::orphans::kill_leftovers(self.runner.data_dir(), &ids);
        self.recover_workflows(snapshot.workflows);
        for (id, attempt) in interrupted {
            tracing::warn!(task = id, attempt, "attempt interrupted by a daemon stop");
            self.finish_attempt(id, AttemptOutcome::Interrupted);
            if let Some(step) = self.tasks[&id].spec.workflow.clone() {
                if self.workflow_still_wants(&step) {
                    self.requeue_interrupted_step(id);
                } else {
                    // Its workflow was cancelled or is rolling back: it was being stopped.
                    self.cancel_waiting(id);
                }
            } else {
                self.settle_attempt(id, attempt, AttemptOutcome::Interrupted);
            }
        }
        self.advance_workflows();
    }

    /// Queues an interrupted workflow step again, without counting the attempt.
    fn requeue_interrupted_step(&mut self, id: TaskId) {
        let task = self.tasks.get_mut(&id).expect("known task");
        task.attempts_before_retry += 1;
        let priority = task.spec.priority;
        self.transition(
            id,
            TaskState::Queued { since: Utc::now() },
            EventKind::Queued,
        );
        self.ready.push(priority, id);
    }
}
