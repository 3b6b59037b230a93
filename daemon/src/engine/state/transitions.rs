//! How tasks move between waiting states: a new task's first state, dependants released
//! by a success or failed by a failure (hard dependencies) or released by any end (soft
//! ones), tasks held until their start time (`not_before`: delayed, then queued by a
//! timer), and finished tasks queued again.

use orch_protocol::{EventKind, Task, TaskId, TaskSpec, TaskState, TaskStatus};

use super::{EngineState, unique};
use crate::store::TaskWrite;

impl EngineState {
    /// Adds one validated task in its first state (`stashed`: held until enqueued).
    pub(super) fn create_task(&mut self, mut spec: TaskSpec, stashed: bool) -> TaskId {
        let id = self.next_id;
        self.next_id += 1;
        spec.after = unique(&spec.after);
        let state = if stashed {
            TaskState::Stashed { since: self.now }
        } else {
            let state = self.initial_state(&spec.after, &spec.soft_after);
            self.held_until(state, spec.not_before)
        };
        let status = state.status();
        let task = Task {
            id,
            spec,
            state,
            submitted_at: self.now,
            attempts: Vec::new(),
            attempts_before_retry: 0,
            progress: None,
        };
        self.enter(&task);
        self.step.batch.tasks.push(TaskWrite {
            task: task.clone(),
            previous: None,
            reindex: None,
        });
        self.tasks.insert(id, task);
        self.log_event(id, EventKind::Submitted { status });
        id
    }

    /// The state a task with these hard and soft dependencies starts in (or returns to on
    /// retry).
    pub(super) fn initial_state(&self, after: &[TaskId], soft_after: &[TaskId]) -> TaskState {
        // A dependency that is gone (removed by `orch clean`, which only removes finished
        // tasks) has finished; a hard one that is gone had succeeded (clean keeps what a
        // kept task that is not queued depends on, and a queued task's hard dependencies
        // all succeeded).
        let mut waiting_on: Vec<TaskId> = soft_after
            .iter()
            .filter(|d| self.state_of(**d).is_some_and(|s| !s.status().is_final()))
            .copied()
            .collect();
        for dep in after {
            match self.state_of(*dep) {
                None | Some(TaskState::Succeeded { .. }) => {}
                // Name the task that failed first, as `fail_dependants` does.
                Some(TaskState::DependencyFailed { dependency, .. }) => {
                    return TaskState::DependencyFailed {
                        at: self.now,
                        dependency,
                    };
                }
                Some(s) if s.status().is_final() => {
                    return TaskState::DependencyFailed {
                        at: self.now,
                        dependency: *dep,
                    };
                }
                Some(_) => waiting_on.push(*dep),
            }
        }
        if waiting_on.is_empty() {
            TaskState::Queued { since: self.now }
        } else {
            TaskState::Blocked { waiting_on }
        }
    }

    /// `state`, or `Delayed` when it is `Queued` and the start time `not_before` is still
    /// to come.
    pub(super) fn held_until(
        &self,
        state: TaskState,
        not_before: Option<chrono::DateTime<chrono::Utc>>,
    ) -> TaskState {
        match (state, not_before) {
            (TaskState::Queued { .. }, Some(until)) if until > self.now => {
                TaskState::Delayed { until }
            }
            (state, _) => state,
        }
    }

    /// Moves `id`, which nothing holds back any more, to `Queued`, or to `Delayed` until
    /// its start time.
    fn ready_or_delayed(&mut self, id: TaskId) {
        let queued = TaskState::Queued { since: self.now };
        match self.held_until(queued, self.tasks[&id].spec.not_before) {
            TaskState::Delayed { until } => {
                self.transition(
                    id,
                    TaskState::Delayed { until },
                    EventKind::Delayed { until },
                );
                let task = self.copy_of(id);
                self.enter(&task);
            }
            _ => self.enqueue(id),
        }
    }

    /// Registers a task that has just entered its state with the queue, the dependency
    /// map, or the timers.
    pub(super) fn enter(&mut self, task: &Task) {
        match &task.state {
            TaskState::Queued { .. } => self.ready.push(task.spec.priority, task.id),
            TaskState::Delayed { until } => {
                self.arm_timer(task.id, task.attempts.len() as u32 + 1, *until);
            }
            TaskState::Blocked { waiting_on } => {
                for dep in waiting_on {
                    self.dependants.entry(*dep).or_default().push(task.id);
                }
            }
            _ => {}
        }
    }

    /// Moves `id` to `Queued` and into the ready queue.
    pub(super) fn enqueue(&mut self, id: TaskId) {
        self.transition(id, TaskState::Queued { since: self.now }, EventKind::Queued);
        let priority = self.tasks[&id].spec.priority;
        self.ready.push(priority, id);
    }

    /// Cancels a task that is not running (waiting, queued or between attempts).
    pub(super) fn cancel_waiting(&mut self, id: TaskId) {
        let task = &self.tasks[&id];
        if matches!(task.state, TaskState::Queued { .. }) {
            let group = self.group_of(&task.spec);
            self.group_task_dropped(&group);
        }
        self.transition(
            id,
            TaskState::Cancelled { at: self.now },
            EventKind::Cancelled,
        );
        self.fail_dependants(id);
    }

    /// Puts a finished task back in `state` (`Delayed` instead of `Queued` before its
    /// start time) with a fresh retry budget.
    pub(super) fn requeue(&mut self, id: TaskId, state: TaskState) {
        let state = self.held_until(state, self.tasks[&id].spec.not_before);
        let task = self.tasks.get_mut(&id).expect("known task");
        task.attempts_before_retry = task.attempts.len() as u32;
        self.transition(id, state, EventKind::Retried);
        let task = self.copy_of(id);
        self.enter(&task);
    }

    /// Tasks that were failed because `root` failed go back to waiting for it.
    pub(super) fn revive_dependants(&mut self, root: TaskId) {
        let failed_by_root = |t: &Task| matches!(t.state, TaskState::DependencyFailed { dependency, .. } if dependency == root);
        let mut revived: Vec<TaskId> = self
            .tasks
            .values()
            .filter(|t| failed_by_root(t))
            .map(|t| t.id)
            .collect();
        // Those the engine does not hold are in the store (and their records there are
        // their latest state).
        let mut stored = Vec::new();
        self.records
            .each_in(TaskStatus::DependencyFailed, &mut |t: Task| {
                if failed_by_root(&t) {
                    stored.push(t.id);
                }
            });
        for id in stored {
            if !self.tasks.contains_key(&id) && self.hold(id) {
                revived.push(id);
            }
        }
        // Dependencies before dependants (a task can only depend on older ones), so each
        // task sees its dependencies' new states.
        revived.sort_unstable();
        for id in revived {
            let spec = &self.tasks[&id].spec;
            let (after, soft_after) = (spec.after.clone(), spec.soft_after.clone());
            match self.initial_state(&after, &soft_after) {
                // Another dependency failed too: it stays failed, now naming that one.
                TaskState::DependencyFailed { dependency, at } => self.transition(
                    id,
                    TaskState::DependencyFailed { dependency, at },
                    EventKind::DependencyFailed { dependency },
                ),
                state => self.requeue(id, state),
            }
        }
    }

    /// After `id` succeeded: dependants waiting only on it become ready.
    pub(super) fn release_dependants(&mut self, id: TaskId) {
        for dependant in self.dependants.remove(&id).unwrap_or_default() {
            self.release_one(dependant, id);
        }
    }

    /// `dependant` no longer waits for `id`; it becomes ready when it waits for nothing.
    fn release_one(&mut self, dependant: TaskId, id: TaskId) {
        let Some(TaskState::Blocked { waiting_on }) =
            self.tasks.get(&dependant).map(|t| t.state.clone())
        else {
            return;
        };
        let rest: Vec<TaskId> = waiting_on.into_iter().filter(|d| *d != id).collect();
        if rest.is_empty() {
            self.ready_or_delayed(dependant);
        } else {
            let task = self.tasks.get_mut(&dependant).expect("known task");
            task.state = TaskState::Blocked { waiting_on: rest };
            let write = TaskWrite {
                task: task.clone(),
                previous: Some(TaskStatus::Blocked),
                reindex: None,
            };
            self.step.batch.tasks.push(write);
        }
    }

    /// After `root` failed for good: everything that needs it (a hard dependency), directly
    /// or not, fails with `dependency_failed` naming `root`; what only waits for it to
    /// finish (a soft dependency) is released.
    pub(super) fn fail_dependants(&mut self, root: TaskId) {
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            for dependant in self.dependants.remove(&id).unwrap_or_default() {
                let blocked = self
                    .tasks
                    .get(&dependant)
                    .is_some_and(|t| matches!(t.state, TaskState::Blocked { .. }));
                if !blocked {
                    continue;
                }
                if !self.tasks[&dependant].spec.after.contains(&id) {
                    self.release_one(dependant, id);
                    continue;
                }
                self.transition(
                    dependant,
                    TaskState::DependencyFailed {
                        at: self.now,
                        dependency: root,
                    },
                    EventKind::DependencyFailed { dependency: root },
                );
                stack.push(dependant);
            }
        }
    }
}
