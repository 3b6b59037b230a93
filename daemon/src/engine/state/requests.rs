//! Clients' requests on tasks: submit (all or none), cancel and retry. Each returns its
//! outcome for the audit log; a refused request changes nothing but the audit log.

use orch_protocol::{ErrorKind, ErrorReply, Task, TaskId, TaskSpec, TaskState, TaskStatus};

use super::{EngineState, Outcome, Reply, StopReason, conflict};
use crate::engine::validate::{MAX_DELAY_MS, validate};

impl EngineState {
    /// Accepts tasks (all or none), `stashed` ones held until they are enqueued.
    pub(super) fn submit(
        &mut self,
        specs: Vec<TaskSpec>,
        stashed: bool,
        reply: Reply<Vec<Task>>,
    ) -> Outcome {
        if let Err(e) = self.validate_submission(&specs) {
            return self.refuse(reply, e);
        }
        let mut ids = Vec::with_capacity(specs.len());
        for spec in specs {
            ids.push(self.create_task(spec, stashed));
        }
        let created: Vec<Task> = ids.iter().map(|id| self.copy_of(*id)).collect();
        self.answer(reply, Ok(created));
        Ok(match (ids.first(), ids.last()) {
            (Some(first), Some(last)) if first != last => format!("tasks {first} to {last}"),
            _ => format!("task {}", ids[0]),
        })
    }

    fn validate_submission(&self, specs: &[TaskSpec]) -> Result<(), ErrorReply> {
        if specs.is_empty() {
            return Err(ErrorReply::field(
                ErrorKind::BadRequest,
                "tasks",
                "no tasks to submit",
            ));
        }
        for (index, spec) in specs.iter().enumerate() {
            validate(spec, index)?;
            self.placeable(spec, index)?;
            self.grouped(spec, index)?;
            self.startable(spec, index)?;
            // Ids are assigned in submission order, so a task may also name a task that
            // comes before it in the same batch (never itself or a later one: no cycles).
            let first_new = self.next_id;
            let known = |d: &TaskId| {
                (first_new..first_new + index as u64).contains(d) || self.state_of(*d).is_some()
            };
            if spec.workflow.is_some() {
                return Err(ErrorReply::field(
                    ErrorKind::BadRequest,
                    "workflow",
                    format!(
                        "task #{index}: `workflow` is set by the daemon for workflow steps; submit a workflow instead"
                    ),
                ));
            }
            if let Some(missing) = spec
                .after
                .iter()
                .chain(&spec.soft_after)
                .find(|d| !known(d))
            {
                let message = if (first_new..first_new + specs.len() as u64).contains(missing) {
                    format!(
                        "task #{index} depends on task {missing}, which comes at or after it in the same submission"
                    )
                } else {
                    format!("task #{index} depends on task {missing}, which does not exist")
                };
                return Err(ErrorReply::field(ErrorKind::BadRequest, "after", message));
            }
        }
        Ok(())
    }

    /// Refuses spec number `index` when its start time is more than a year away (one
    /// gone by starts it at once).
    fn startable(&self, spec: &TaskSpec, index: usize) -> Result<(), ErrorReply> {
        match spec.not_before {
            Some(at) => self.start_time_allowed(at, &format!("task #{index}")),
            None => Ok(()),
        }
    }

    /// Refuses a start time more than a year away for `subject` (`task #2` of a
    /// submission, `task 41` of an enqueue), naming `not_before`.
    pub(super) fn start_time_allowed(
        &self,
        at: chrono::DateTime<chrono::Utc>,
        subject: &str,
    ) -> Result<(), ErrorReply> {
        let latest = self.now + chrono::Duration::milliseconds(MAX_DELAY_MS as i64);
        if at <= latest {
            return Ok(());
        }
        Err(ErrorReply::field(
            ErrorKind::BadRequest,
            "not_before",
            format!("{subject}: the start time {at} is more than a year away"),
        ))
    }

    /// Refuses spec number `index` when no node has every label it requires (`on`).
    pub(super) fn placeable(&self, spec: &TaskSpec, index: usize) -> Result<(), ErrorReply> {
        if self.nodes.can_run(&spec.on) {
            return Ok(());
        }
        Err(ErrorReply::field(
            ErrorKind::BadRequest,
            "on",
            format!(
                "task #{index} requires a node labelled {}, and no node has all of them (nodes: {})",
                spec.on.join(", "),
                self.nodes.describe()
            ),
        ))
    }

    /// Cancels a task: a waiting one at once, a running one by stopping its attempt (the
    /// answer waits for the attempt's end).
    pub(super) fn cancel(&mut self, id: TaskId, reply: Reply<Task>) -> Outcome {
        if !self.hold(id) {
            return self.refuse(reply, not_found(id));
        }
        let task = &self.tasks[&id];
        let status = task.state.status();
        if status.is_final() {
            let error = conflict(format!(
                "task {id} is already {}; there is nothing to cancel",
                status.as_str()
            ));
            return self.refuse(reply, error);
        }
        if self.running.contains_key(&id) {
            self.stop(id, StopReason::Cancel);
            self.cancel_waiters.entry(id).or_default().push(reply);
            return Ok(format!("task {id}: stopping its running attempt"));
        }
        self.cancel_waiting(id);
        let task = self.copy_of(id);
        self.answer(reply, Ok(task));
        Ok(format!("task {id} cancelled"))
    }

    /// Queues a finished task again, with a fresh retry budget.
    pub(super) fn retry(&mut self, id: TaskId, reply: Reply<Task>) -> Outcome {
        if !self.hold(id) {
            return self.refuse(reply, not_found(id));
        }
        let task = &self.tasks[&id];
        let status = task.state.status();
        if !status.is_final() || status == TaskStatus::Succeeded {
            let error = conflict(format!(
                "task {id} is {}; only failed, cancelled or dependency_failed tasks can be retried",
                status.as_str()
            ));
            return self.refuse(reply, error);
        }
        if let Some(step) = &task.spec.workflow {
            let workflow = self.workflows.get(&step.workflow).map(|w| w.state.status());
            if workflow != Some(orch_protocol::WorkflowStatus::Running) {
                let error = conflict(format!(
                    "task {id} is step `{}` of workflow {}, which is {}: roll the workflow back or submit it again",
                    step.step,
                    step.workflow,
                    workflow.map_or("gone", |s| s.as_str())
                ));
                return self.refuse(reply, error);
            }
        }
        let state = self.initial_state(&task.spec.after, &task.spec.soft_after);
        if let TaskState::DependencyFailed { dependency, .. } = state {
            let error = conflict(format!(
                "task {id} depends on task {dependency}, which did not succeed: retry that one first"
            ));
            return self.refuse(reply, error);
        }
        self.requeue(id, state);
        self.revive_dependants(id);
        let task = self.copy_of(id);
        self.answer(reply, Ok(task));
        Ok(format!("task {id} queued again"))
    }
}

/// The refusal of a request about task `id`, which does not exist.
pub(super) fn not_found(id: TaskId) -> ErrorReply {
    ErrorReply::field(ErrorKind::NotFound, "id", format!("there is no task {id}"))
}
