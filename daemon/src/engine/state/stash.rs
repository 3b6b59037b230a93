//! Tasks that have not started, changed on request: stashed (held, never started until
//! enqueued), enqueued (released into the state a submission would have given them), or
//! edited (what they run, their priority, label, environment, parameters or
//! dependencies). Each change is one record write and one event; a refused one changes
//! nothing.
//!
//! A stashed task is not held in memory (nothing schedules it): its record is read from
//! the store when it is enqueued, edited or cancelled, and `orch clean` reads the stashed
//! ones so that what they depend on stays.

use orch_protocol::{
    ErrorKind, ErrorReply, EventKind, Task, TaskChange, TaskEdit, TaskId, TaskSpec, TaskState,
    TaskStatus,
};

use super::requests::not_found;
use super::{EngineState, Outcome, Reply, conflict, unique};
use crate::engine::validate::validate_as;
use crate::store::{Indexed, TaskWrite};

impl EngineState {
    /// Carries out `change` on task `id`, answering with the task as it is then.
    pub(super) fn change_task(
        &mut self,
        id: TaskId,
        change: TaskChange,
        reply: Reply<Task>,
    ) -> Outcome {
        if !self.hold(id) {
            return self.refuse(reply, not_found(id));
        }
        let done = match change {
            TaskChange::Stash => self.stash(id),
            TaskChange::Enqueue { not_before } => self.release_stashed(id, not_before),
            TaskChange::Edit(edit) => self.edit(id, edit),
        };
        match done {
            Ok(outcome) => {
                let task = self.copy_of(id);
                self.answer(reply, Ok(task));
                Ok(outcome)
            }
            Err(error) => self.refuse(reply, error),
        }
    }

    /// The status of task `id` (held in full) when it is a task of its own that has not
    /// started; else why it cannot be `done` ("stashed", "edited", ...).
    fn unstarted(&self, id: TaskId, done: &str) -> Result<TaskStatus, ErrorReply> {
        let task = &self.tasks[&id];
        if let Some(step) = &task.spec.workflow {
            return Err(conflict(format!(
                "task {id} is step `{}` of workflow {}, which decides when it runs; only a task submitted on its own can be {done}",
                step.step, step.workflow
            )));
        }
        match task.state.status() {
            status @ (TaskStatus::Stashed
            | TaskStatus::Queued
            | TaskStatus::Blocked
            | TaskStatus::Delayed) => Ok(status),
            status => Err(conflict(format!(
                "task {id} is {}; only a task that has not started (stashed, queued, blocked or delayed) can be {done}",
                status.as_str()
            ))),
        }
    }

    /// Holds a queued, blocked or delayed task: it starts only once enqueued.
    fn stash(&mut self, id: TaskId) -> Result<String, ErrorReply> {
        if self.unstarted(id, "stashed")? == TaskStatus::Stashed {
            return Err(conflict(format!("task {id} is already stashed")));
        }
        self.leave_waiting(id);
        let stashed = TaskState::Stashed { since: self.now };
        self.transition(id, stashed, EventKind::Stashed);
        Ok(format!("task {id} stashed"))
    }

    /// Releases a stashed task into the state a submission would have given it (with a
    /// new start time when `not_before` is given).
    fn release_stashed(
        &mut self,
        id: TaskId,
        not_before: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<String, ErrorReply> {
        let status = self.unstarted(id, "enqueued")?;
        if status != TaskStatus::Stashed {
            return Err(conflict(format!(
                "task {id} is {}, not stashed; only a stashed task is enqueued",
                status.as_str()
            )));
        }
        if let Some(at) = not_before {
            self.start_time_allowed(at, &format!("task {id}"))?;
        }
        let spec = &self.tasks[&id].spec;
        let not_before = not_before.or(spec.not_before);
        let state = self.waiting_state(id, "id", &spec.after, &spec.soft_after, not_before)?;
        let status = state.status();
        self.tasks.get_mut(&id).expect("held").spec.not_before = not_before;
        self.transition(id, state, EventKind::Enqueued { status });
        let task = self.copy_of(id);
        self.enter(&task);
        Ok(format!("task {id} enqueued ({})", status.as_str()))
    }

    /// Replaces the fields `edit` names in a task that has not started; new dependencies
    /// may block a queued task or release a blocked one (a stashed task stays stashed).
    fn edit(&mut self, id: TaskId, edit: TaskEdit) -> Result<String, ErrorReply> {
        let status = self.unstarted(id, "edited")?;
        let fields = edit.fields();
        if fields.is_empty() {
            return Err(ErrorReply::field(
                ErrorKind::BadRequest,
                "change",
                "nothing to edit: name at least one of command, priority, label, env, params or after",
            ));
        }
        let task = &self.tasks[&id];
        let before = Indexed {
            priority: task.spec.priority,
            label: task.spec.label.clone(),
        };
        let spec = edited_spec(&task.spec, &edit);
        validate_as(&spec, &format!("task {id}"))?;
        let after = &spec.after; // without repeats
        let state = match &edit.after {
            Some(_) if status != TaskStatus::Stashed => {
                self.dependencies_allowed(id, after)?;
                let soft = &spec.soft_after;
                match self.waiting_state(id, "after", after, soft, spec.not_before)? {
                    // Still queued: it keeps its place in time.
                    TaskState::Queued { .. } if status == TaskStatus::Queued => None,
                    state => Some(state),
                }
            }
            Some(_) => {
                self.dependencies_allowed(id, after)?;
                None
            }
            None => None,
        };
        self.apply_edit(id, spec, state, before);
        let fields: Vec<String> = fields.into_iter().map(str::to_string).collect();
        Ok(format!("task {id}: edited {}", fields.join(", ")))
    }

    /// Writes task `id` with `spec` (and `state`, when its dependencies moved it), its
    /// indexes moved from `before`, with one `edited` event; then registers it where its
    /// state waits (the ready queue, its dependencies, a timer).
    fn apply_edit(
        &mut self,
        id: TaskId,
        spec: TaskSpec,
        state: Option<TaskState>,
        before: Indexed,
    ) {
        let old_status = self.tasks[&id].state.status();
        // New dependencies give a waiting task a new state (a queued one that stays queued
        // keeps its own): it leaves where it waited, and enters where it waits now.
        let moved = state.is_some();
        if moved {
            self.leave_waiting(id);
        }
        let fields = self.edited_fields(id, &spec);
        let task = self.tasks.get_mut(&id).expect("held");
        let priority_changed = task.spec.priority != spec.priority;
        task.spec = spec;
        if let Some(state) = state {
            task.state = state;
        }
        let status = task.state.status();
        self.step.batch.tasks.push(TaskWrite {
            task: task.clone(),
            previous: Some(old_status),
            reindex: Some(before),
        });
        self.log_event(id, EventKind::Edited { fields, status });
        let task = self.copy_of(id);
        match status {
            TaskStatus::Queued if moved || priority_changed => self.enter(&task),
            TaskStatus::Blocked | TaskStatus::Delayed if moved => self.enter(&task),
            _ => {}
        }
    }

    /// The names of the fields `spec` changes in task `id`'s spec.
    fn edited_fields(&self, id: TaskId, spec: &TaskSpec) -> Vec<String> {
        let old = &self.tasks[&id].spec;
        [
            (old.kind != spec.kind, "command"),
            (old.priority != spec.priority, "priority"),
            (old.label != spec.label, "label"),
            (old.env != spec.env, "env"),
            (old.params != spec.params, "params"),
            (old.after != spec.after, "after"),
        ]
        .into_iter()
        .filter(|(changed, _)| *changed)
        .map(|(_, name)| name.to_string())
        .collect()
    }

    /// Takes task `id` (queued, blocked or delayed) out of where it waits: its group's
    /// count of queued tasks, its dependencies' lists of dependants. A ready-queue entry or
    /// a timer left behind is stale, and skipped when it comes up.
    fn leave_waiting(&mut self, id: TaskId) {
        match self.tasks[&id].state.clone() {
            TaskState::Queued { .. } => {
                let group = self.group_of(&self.tasks[&id].spec);
                self.group_task_dropped(&group);
            }
            TaskState::Blocked { waiting_on } => {
                for dependency in waiting_on {
                    if let Some(dependants) = self.dependants.get_mut(&dependency) {
                        dependants.retain(|d| *d != id);
                        if dependants.is_empty() {
                            self.dependants.remove(&dependency);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// The state task `id` waits in with these dependencies and start time; refused when
    /// a hard dependency did not succeed (the task would never run), naming `field`.
    fn waiting_state(
        &self,
        id: TaskId,
        field: &str,
        after: &[TaskId],
        soft_after: &[TaskId],
        not_before: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<TaskState, ErrorReply> {
        match self.initial_state(after, soft_after) {
            TaskState::DependencyFailed { dependency, .. } => Err(ErrorReply::field(
                ErrorKind::Conflict,
                field,
                format!(
                    "task {id} depends on task {dependency}, which did not succeed, so it would never run: retry task {dependency} first, or change its dependencies (orch edit {id} --after [...])"
                ),
            )),
            state => Ok(self.held_until(state, not_before)),
        }
    }

    /// Refuses new dependencies of task `id` that do not exist, or that were not
    /// submitted before it (which keeps dependencies free of cycles).
    fn dependencies_allowed(&self, id: TaskId, after: &[TaskId]) -> Result<(), ErrorReply> {
        let bad = |message: String| ErrorReply::field(ErrorKind::BadRequest, "after", message);
        for dependency in after {
            if *dependency >= id {
                return Err(bad(format!(
                    "task {id} can only depend on tasks submitted before it, and task {dependency} was not"
                )));
            }
            if self.state_of(*dependency).is_none() {
                return Err(bad(format!(
                    "task {id} would depend on task {dependency}, which does not exist"
                )));
            }
        }
        Ok(())
    }
}

/// `spec` with the fields `edit` names replaced.
fn edited_spec(spec: &TaskSpec, edit: &TaskEdit) -> TaskSpec {
    let mut spec = spec.clone();
    if let Some(kind) = &edit.kind {
        spec.kind = kind.clone();
    }
    if let Some(priority) = edit.priority {
        spec.priority = priority;
    }
    if let Some(label) = &edit.label {
        spec.label = label.clone();
    }
    if let Some(env) = &edit.env {
        spec.env = env.clone();
    }
    if let Some(params) = &edit.params {
        spec.params = params.clone();
    }
    if let Some(after) = &edit.after {
        spec.after = unique(after);
    }
    spec
}
