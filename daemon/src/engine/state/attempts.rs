//! Attempts: started while slots are free, ended by the runner's reports (success,
//! retry after a backoff, failure; a cancel or a shutdown decides how a stopped attempt
//! counts), deferred when the system lacked resources to start them, and their progress,
//! coalesced to the latest value per task per commit.

use std::cmp::Reverse;
use std::collections::HashSet;
use std::time::Duration;

use orch_protocol::{Attempt, AttemptOutcome, EventKind, Progress, TaskId, TaskState, TaskStatus};

use super::backoff::retry_delay;
use super::{EngineState, Lifecycle, NodeName, NodeOffer, Running, StopReason};
use crate::engine::effects::{Start, Timer};
use crate::store::TaskWrite;

/// How long a task whose attempt could not start for lack of resources waits before the
/// attempt is tried again.
pub(super) const START_RETRY_DELAY: Duration = Duration::from_secs(2);

/// How many queued tasks that no node can take now, or that their group holds back, one
/// turn sets aside looking for one that can run, at most (each may have to be read from
/// the store).
const MAX_PASSED_OVER: usize = 256;

impl EngineState {
    /// Starts queued tasks while slots are free (none once a shutdown has begun), each on
    /// a node with a free slot and the labels it requires. A task no node can take now
    /// waits aside (with its labels, so that looking again reads nothing) while the tasks
    /// behind it go on; the waiting ones are looked at again, first, whenever a slot
    /// frees or the nodes change.
    pub(super) fn dispatch(&mut self) {
        if self.controls.paused {
            return; // the whole queue is paused: nothing starts
        }
        if std::mem::take(&mut self.unplaced_changed) {
            self.place_waiting();
        }
        let mut passed_over = 0;
        while matches!(self.lifecycle, Lifecycle::Serving) && self.nodes.has_room() {
            let Some((priority, id)) = self.ready.pop_entry() else {
                break;
            };
            let read_in = self.cold.contains_key(&id);
            if !self.hold_live(id) {
                continue; // a stale entry: finished (and let go of) since it was queued
            }
            let task = &self.tasks[&id];
            if !matches!(task.state, TaskState::Queued { .. }) {
                continue; // a stale entry: cancelled, stashed or already started
            }
            if task.spec.priority != priority {
                continue; // a stale entry: an edit queued it again at its new priority
            }
            let Some(node) = self.nodes.pick(&task.spec.on) else {
                let key = (Reverse(task.spec.priority), id);
                self.unplaced.insert(key, task.spec.on.clone());
                self.parked(id);
                passed_over += 1;
                if passed_over == MAX_PASSED_OVER {
                    break; // the next turn (its commit is one) goes on
                }
                continue;
            };
            if !self.group_allows(id) {
                // Its group is paused or at its limit: held back until it frees. Only
                // those read from the store count (a read one makes this step settle,
                // and the next turn go on).
                passed_over += usize::from(read_in);
                if passed_over == MAX_PASSED_OVER {
                    break;
                }
                continue;
            }
            if !self.take_workflow_slot(id) {
                self.parked(id);
                continue; // its workflow is at its limit: deferred until a slot frees
            }
            self.start_attempt(id, node);
        }
    }

    /// Starts the tasks waiting for a node that a node can take now, in queue order.
    fn place_waiting(&mut self) {
        let keys: Vec<(Reverse<i32>, TaskId)> = self.unplaced.keys().copied().collect();
        for key in keys {
            if !matches!(self.lifecycle, Lifecycle::Serving) || !self.nodes.has_room() {
                return;
            }
            let Some(node) = self.nodes.pick(&self.unplaced[&key]) else {
                continue;
            };
            self.unplaced.remove(&key);
            let id = key.1;
            let queued =
                self.hold_live(id) && matches!(self.tasks[&id].state, TaskState::Queued { .. });
            if !queued || !self.group_allows(id) {
                continue;
            }
            if self.take_workflow_slot(id) {
                self.start_attempt(id, node);
            } else {
                self.parked(id);
            }
        }
    }

    /// Marks `id`'s next attempt running on `node` and asks for its launch.
    fn start_attempt(&mut self, id: TaskId, node: NodeName) {
        let started_at = self.now;
        let placed = self.nodes.placed().then(|| node.clone());
        let group = self.group_of(&self.tasks[&id].spec);
        let task = self.tasks.get_mut(&id).expect("a queued task");
        let attempt = task.attempts.len() as u32 + 1;
        task.attempts.push(Attempt {
            number: attempt,
            started_at,
            finished_at: None,
            outcome: None,
            node: placed.as_deref().map(str::to_string),
        });
        task.progress = None;
        let mut spec = task.spec.clone();
        // Running it needs neither its start time nor its group (a node of an earlier
        // version could not read a spec that has them).
        spec.not_before = None;
        spec.group = None;
        self.transition(
            id,
            TaskState::Running {
                attempt,
                started_at,
                paused_at: None,
            },
            EventKind::Started { attempt },
        );
        self.nodes.take(&node);
        self.group_started(&group);
        let running = Running {
            attempt,
            stop: None,
            node,
            group,
            input_closed: false,
        };
        self.running.insert(id, running);
        let start = Start {
            id,
            attempt,
            spec,
            node: placed,
        };
        self.step.effects.launches.push(start);
    }

    /// The running attempts of the nodes not in `holding` (their leases ran out: their
    /// processes are gone), as `(task, attempt)`.
    pub fn attempts_lost(&self, holding: &HashSet<NodeName>) -> Vec<(TaskId, u32)> {
        let mut lost: Vec<_> = self
            .running
            .iter()
            .filter(|(_, r)| !holding.contains(&r.node))
            .map(|(id, r)| (*id, r.attempt))
            .collect();
        lost.sort_unstable();
        lost
    }

    /// The cluster's nodes changed: attempts go to the nodes of `offers` from now on, and
    /// the attempts of nodes not in `holding` are interrupted (their leases ran out, so
    /// their processes are gone) as a daemon's crash interrupts them: a workflow's step
    /// is queued again without using a retry, another task follows its retry policy,
    /// and an attempt being cancelled or stopped ends as that makes it end.
    pub(super) fn nodes_changed(&mut self, offers: Vec<NodeOffer>, holding: &HashSet<NodeName>) {
        for (id, attempt) in self.attempts_lost(holding) {
            let running = &self.running[&id];
            let node = running.node.clone();
            tracing::warn!(task = id, attempt, %node, "the attempt's node is gone: interrupted");
            if running.stop.is_some() {
                self.exited(id, attempt, AttemptOutcome::Interrupted);
            } else {
                self.end_running(id, attempt);
                self.interrupted(id, attempt);
            }
        }
        self.nodes.replace(offers);
        self.unplaced_changed = true;
    }

    /// The running attempt of `id`, if it is attempt `attempt`, taken out of the running
    /// ones (its slots freed).
    fn end_running(&mut self, id: TaskId, attempt: u32) -> Option<Running> {
        if self.running.get(&id)?.attempt != attempt {
            return None; // an earlier attempt's late report
        }
        let running = self.running.remove(&id)?;
        self.nodes.free(&running.node);
        self.unplaced_changed = true;
        self.release_workflow_slot(id);
        self.group_stopped(&running.group);
        Some(running)
    }

    /// An attempt ended with `outcome`.
    pub(super) fn exited(&mut self, id: TaskId, attempt: u32, outcome: AttemptOutcome) {
        let Some(running) = self.end_running(id, attempt) else {
            return;
        };
        let outcome = match running.stop {
            Some(StopReason::Cancel) if !outcome.is_success() => AttemptOutcome::Cancelled,
            Some(StopReason::Shutdown) if !outcome.is_success() => AttemptOutcome::Interrupted,
            _ => outcome,
        };
        self.finish_attempt(id, outcome.clone());
        if running.stop == Some(StopReason::Shutdown) && !outcome.is_success() {
            // A graceful stop is not the task's fault: requeue without using a retry (the
            // next start reads the queue from the store).
            let task = self.tasks.get_mut(&id).expect("known task");
            task.attempts_before_retry += 1;
            self.transition(id, TaskState::Queued { since: self.now }, EventKind::Queued);
        } else {
            self.settle_attempt(id, attempt, outcome);
        }
        let waiters = self.cancel_waiters.remove(&id).unwrap_or_default();
        for reply in waiters {
            let task = self.copy_of(id);
            self.answer(reply, Ok(task));
        }
    }

    /// Records the outcome on the task's last attempt.
    pub(super) fn finish_attempt(&mut self, id: TaskId, outcome: AttemptOutcome) {
        let now = self.now;
        let task = self.tasks.get_mut(&id).expect("known task");
        if let Some(last) = task.attempts.last_mut() {
            last.finished_at = Some(now);
            last.outcome = Some(outcome);
        }
    }

    /// Moves a task whose attempt ended to its next state: succeeded, retry, or failed.
    pub(super) fn settle_attempt(&mut self, id: TaskId, attempt: u32, outcome: AttemptOutcome) {
        let now = self.now;
        if outcome.is_success() {
            self.transition(
                id,
                TaskState::Succeeded { finished_at: now },
                EventKind::Succeeded { attempt },
            );
            self.release_dependants(id);
            return;
        }
        if outcome == AttemptOutcome::Cancelled {
            self.transition(id, TaskState::Cancelled { at: now }, EventKind::Cancelled);
            self.fail_dependants(id);
            return;
        }
        let task = &self.tasks[&id];
        if task.attempts_in_round() < task.max_attempts() {
            let next_attempt = attempt + 1;
            let delay = retry_delay(&task.spec.backoff, task.attempts_in_round() + 1);
            let retry_at = self.after(delay);
            self.transition(
                id,
                TaskState::RetryWaiting {
                    next_attempt,
                    retry_at,
                },
                EventKind::AttemptFailed {
                    attempt,
                    outcome,
                    retry_at,
                },
            );
            self.arm_timer(id, next_attempt, retry_at);
        } else {
            self.transition(
                id,
                TaskState::Failed {
                    finished_at: now,
                    reason: outcome.clone(),
                },
                EventKind::Failed { outcome },
            );
            self.fail_dependants(id);
        }
    }

    /// Asks for a timer that queues `id` for `next_attempt` at `due`.
    pub(super) fn arm_timer(
        &mut self,
        id: TaskId,
        next_attempt: u32,
        due: chrono::DateTime<chrono::Utc>,
    ) {
        let timer = Timer {
            id,
            next_attempt,
            due,
        };
        self.step.effects.timers.push(timer);
    }

    /// An attempt could not start for lack of system resources: unless it was being
    /// stopped anyway, it is not counted, and the task waits a short delay to try it again.
    pub(super) fn not_started(&mut self, id: TaskId, attempt: u32, reason: String) {
        let Some(running) = self.running.get(&id).filter(|r| r.attempt == attempt) else {
            return;
        };
        if running.stop.is_some() {
            // A cancel or a shutdown came first: the attempt ends as they make it end.
            return self.exited(id, attempt, AttemptOutcome::SpawnFailed { error: reason });
        }
        self.end_running(id, attempt);
        let task = self.tasks.get_mut(&id).expect("known task");
        if task.attempts.last().is_some_and(|a| a.number == attempt) {
            task.attempts.pop();
        }
        let retry_at = self.after(START_RETRY_DELAY);
        self.transition(
            id,
            TaskState::RetryWaiting {
                next_attempt: attempt,
                retry_at,
            },
            EventKind::StartDeferred {
                attempt,
                reason,
                retry_at,
            },
        );
        self.arm_timer(id, attempt, retry_at);
    }

    /// A retry delay passed, or a start time came: the task is queued, unless the timer
    /// is stale (the task was cancelled or retried meanwhile).
    pub(super) fn retry_due(&mut self, id: TaskId, attempt: u32) {
        let Some(task) = self.tasks.get(&id) else {
            return;
        };
        let due = match task.state {
            TaskState::RetryWaiting { next_attempt, .. } => next_attempt == attempt,
            // A timer that fires before the wall clock reaches the start time (the clock
            // was set back) waits again.
            TaskState::Delayed { until } if until > self.now => {
                return self.arm_timer(id, attempt, until);
            }
            TaskState::Delayed { .. } => task.attempts.len() as u32 + 1 == attempt,
            _ => false,
        };
        if due {
            self.enqueue(id);
        }
    }

    /// Records a task's progress in memory; it is written (the latest value only) by
    /// `flush_progress` or with the task's next change.
    pub(super) fn progress(&mut self, id: TaskId, attempt: u32, progress: Progress) {
        let Some(task) = self.tasks.get_mut(&id) else {
            return;
        };
        if !matches!(task.state, TaskState::Running { attempt: a, .. } if a == attempt) {
            return;
        }
        task.progress = Some(progress);
        self.progress_dirty.insert(id);
    }

    /// The progress event of `id`'s current progress.
    pub(super) fn log_progress(&mut self, id: TaskId) {
        if let Some(progress) = self.tasks.get(&id).and_then(|t| t.progress.clone()) {
            self.log_event(id, EventKind::Progress { progress });
        }
    }

    /// Adds the latest progress of each task whose progress changed to the step, unless
    /// the previous such batch is not durable yet: however fast tasks print progress, each
    /// task record is written at most once per commit.
    pub(super) fn flush_progress(&mut self) {
        if self.progress_in_flight || self.progress_dirty.is_empty() {
            return;
        }
        for id in std::mem::take(&mut self.progress_dirty) {
            let Some(task) = self.tasks.get(&id) else {
                continue;
            };
            if !matches!(task.state, TaskState::Running { .. }) {
                continue;
            }
            let write = TaskWrite {
                task: task.clone(),
                previous: Some(TaskStatus::Running),
                reindex: None,
            };
            self.step.batch.tasks.push(write);
            self.log_progress(id);
        }
        self.progress_in_flight = true;
        self.step.effects.progress_written = true;
    }
}
