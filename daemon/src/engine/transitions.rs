//! How each command changes tasks.

use chrono::Utc;
use orch_protocol::{
    AttemptOutcome, ErrorKind, ErrorReply, EventKind, Progress, Task, TaskId, TaskKind, TaskSpec,
    TaskState, TaskStatus,
};

use super::backoff::retry_delay;
use super::{Engine, Outcome, Reply, StopReason, after, snapshot_of, unique};
use crate::store::TaskWrite;

/// How long a task whose attempt could not start for lack of resources waits before the
/// attempt is tried again.
const START_RETRY_DELAY: std::time::Duration = std::time::Duration::from_secs(2);

/// The longest timeout or retry delay accepted: a year.
const MAX_DELAY_MS: u64 = 365 * 24 * 3600 * 1000;

/// The largest task spec accepted, as JSON: far enough below the frame limit that any
/// answer carrying the task (with its history) still fits in a frame.
const MAX_SPEC_BYTES: usize = 4 * 1024 * 1024;

/// Checks a spec on its own (dependencies are checked by the engine).
pub(super) fn validate(spec: &TaskSpec, index: usize) -> Result<(), ErrorReply> {
    let bad = |field: &str, message: String| {
        Err(ErrorReply::field(
            ErrorKind::BadRequest,
            field,
            format!("task #{index}: {message}"),
        ))
    };
    match &spec.kind {
        TaskKind::Command { program, .. } if program.trim().is_empty() => {
            bad("command", "the program is empty".into())
        }
        TaskKind::Nu { code } if code.trim().is_empty() => {
            bad("nu", "the Nushell snippet is empty".into())
        }
        TaskKind::NuFile { path } if path.as_os_str().is_empty() => {
            bad("nu", "the script path is empty".into())
        }
        _ if spec.timeout_ms == Some(0) => bad("timeout", "the timeout must be positive".into()),
        _ if spec.timeout_ms.is_some_and(|t| t > MAX_DELAY_MS) => {
            bad("timeout", "the timeout must not exceed a year".into())
        }
        _ if spec.backoff.max_ms > MAX_DELAY_MS => {
            bad("backoff", "the backoff must not exceed a year".into())
        }
        _ if spec.backoff.initial_ms > spec.backoff.max_ms => bad(
            "backoff",
            format!(
                "the initial backoff ({} ms) exceeds the maximum ({} ms)",
                spec.backoff.initial_ms, spec.backoff.max_ms
            ),
        ),
        _ if spec.label.as_deref().is_some_and(|l| l.trim().is_empty()) => {
            bad("label", "the label is empty".into())
        }
        _ if spec_size(spec) > MAX_SPEC_BYTES => bad(
            "params",
            format!(
                "the task is {} bytes as JSON; the limit is {MAX_SPEC_BYTES} (pass large data as a file)",
                spec_size(spec)
            ),
        ),
        _ => match exec_limits(spec) {
            Err((field, message)) => bad(field, message),
            Ok(()) => Ok(()),
        },
    }
}

/// The longest single argument or environment entry (`KEY=value`) Linux passes to a
/// program (MAX_ARG_STRLEN, 128 KiB with its terminating NUL).
const MAX_EXEC_STRING: usize = 128 * 1024 - 1;

/// The most the environment entries of `--env` may take together: well inside the
/// system's limit on arguments and environment together (ARG_MAX, usually 2 MiB), which
/// the daemon's own environment and the task's arguments share.
const MAX_ENV_BYTES: usize = 1024 * 1024;

/// The most a task's arguments may take together (the same shared limit).
const MAX_ARGS_BYTES: usize = 512 * 1024;

/// Checks what the system's `exec` would refuse (so that a task accepted can start):
/// the environment and the arguments. Parameters are not limited here: large ones are
/// passed in a file.
fn exec_limits(spec: &TaskSpec) -> Result<(), (&'static str, String)> {
    let mut env_bytes = 0;
    for (key, value) in &spec.env {
        if key.is_empty() || key.contains(['=', '\0']) {
            return Err((
                "env",
                format!("the variable name {key:?} is empty or has `=` or a NUL byte"),
            ));
        }
        if value.contains('\0') {
            return Err(("env", format!("the value of {key} has a NUL byte")));
        }
        let entry = key.len() + 1 + value.len();
        if entry > MAX_EXEC_STRING {
            return Err((
                "env",
                format!(
                    "{key} is {entry} bytes; one variable may hold at most {MAX_EXEC_STRING} (pass large data in params)"
                ),
            ));
        }
        env_bytes += entry + 1;
    }
    if env_bytes > MAX_ENV_BYTES {
        return Err((
            "env",
            format!(
                "the environment variables take {env_bytes} bytes; the limit is {MAX_ENV_BYTES} (pass large data in params)"
            ),
        ));
    }
    let (field, args): (&'static str, Vec<&str>) = match &spec.kind {
        TaskKind::Command { program, args } => (
            "command",
            std::iter::once(program.as_str())
                .chain(args.iter().map(String::as_str))
                .collect(),
        ),
        TaskKind::Nu { code } => ("nu", vec![code.as_str()]),
        TaskKind::NuFile { .. } => return Ok(()),
    };
    if args.iter().any(|a| a.contains('\0')) {
        return Err((field, "an argument has a NUL byte".into()));
    }
    if let Some(long) = args
        .iter()
        .find(|a| a.len() + crate::runner::PRELUDE.len() > MAX_EXEC_STRING)
    {
        return Err((
            field,
            format!(
                "an argument is {} bytes; one argument may hold at most {} (use a script file, or pass data in params)",
                long.len(),
                MAX_EXEC_STRING - crate::runner::PRELUDE.len()
            ),
        ));
    }
    let total: usize = args.iter().map(|a| a.len() + 1).sum();
    if total > MAX_ARGS_BYTES {
        return Err((
            field,
            format!(
                "the arguments take {total} bytes; the limit is {MAX_ARGS_BYTES} (pass data in params)"
            ),
        ));
    }
    Ok(())
}

fn spec_size(spec: &TaskSpec) -> usize {
    serde_json::to_vec(spec).map_or(usize::MAX, |v| v.len())
}

impl Engine {
    /// Accepts tasks (all or none); returns the outcome for the audit log.
    pub(super) fn submit(&mut self, specs: Vec<TaskSpec>, reply: Reply<Vec<Task>>) -> Outcome {
        if let Err(e) = self.validate_submission(&specs) {
            return self.refuse(reply, e);
        }
        let mut ids = Vec::with_capacity(specs.len());
        for spec in specs {
            ids.push(self.create_task(spec));
        }
        let created: Vec<Task> = ids.iter().map(|id| snapshot_of(&self.tasks, *id)).collect();
        self.after_commit(move |result| {
            let _ = reply.send(match result {
                Ok(()) => Ok(created),
                Err(e) => Err(ErrorReply::new(ErrorKind::Internal, e.to_string())),
            });
        });
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
            // Ids are assigned in submission order, so a task may also name a task that
            // comes before it in the same batch (never itself or a later one: no cycles).
            let first_new = self.next_id;
            let known = |d: &TaskId| {
                self.tasks.contains_key(d) || (first_new..first_new + index as u64).contains(d)
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

    /// Adds one validated task in its first state.
    pub(super) fn create_task(&mut self, mut spec: TaskSpec) -> TaskId {
        let id = self.next_id;
        self.next_id += 1;
        spec.after = unique(&spec.after);
        let state = self.initial_state(&spec.after, &spec.soft_after);
        let status = state.status();
        let task = Task {
            id,
            spec,
            state,
            submitted_at: Utc::now(),
            attempts: Vec::new(),
            attempts_before_retry: 0,
            progress: None,
        };
        self.enter(&task);
        self.pending.batch.tasks.push(TaskWrite {
            task: task.clone(),
            previous: None,
        });
        self.tasks.insert(id, task);
        self.log_event(id, EventKind::Submitted { status });
        id
    }

    /// The state a task with these hard and soft dependencies starts in (or returns to on
    /// retry).
    fn initial_state(&self, after: &[TaskId], soft_after: &[TaskId]) -> TaskState {
        // A dependency that is gone (removed by `orch clean`, which only removes finished
        // tasks) has finished.
        let mut waiting_on: Vec<TaskId> = soft_after
            .iter()
            .filter(|d| {
                self.tasks
                    .get(*d)
                    .is_some_and(|t| !t.state.status().is_final())
            })
            .copied()
            .collect();
        for dep in after {
            match &self.tasks[dep].state {
                TaskState::Succeeded { .. } => {}
                // Name the task that failed first, as `fail_dependants` does.
                TaskState::DependencyFailed { dependency, .. } => {
                    return TaskState::DependencyFailed {
                        at: Utc::now(),
                        dependency: *dependency,
                    };
                }
                s if s.status().is_final() => {
                    return TaskState::DependencyFailed {
                        at: Utc::now(),
                        dependency: *dep,
                    };
                }
                _ => waiting_on.push(*dep),
            }
        }
        if waiting_on.is_empty() {
            TaskState::Queued { since: Utc::now() }
        } else {
            TaskState::Blocked { waiting_on }
        }
    }

    /// Registers a task that has just entered its state with the queue or the
    /// dependency map.
    pub(super) fn enter(&mut self, task: &Task) {
        match &task.state {
            TaskState::Queued { .. } => self.ready.push(task.spec.priority, task.id),
            TaskState::Blocked { waiting_on } => {
                for dep in waiting_on {
                    self.dependants.entry(*dep).or_default().push(task.id);
                }
            }
            _ => {}
        }
    }

    /// Cancels a task; returns the outcome for the audit log.
    pub(super) fn cancel(&mut self, id: TaskId, reply: Reply<Task>) -> Outcome {
        let Some(task) = self.tasks.get(&id) else {
            return self.refuse(reply, not_found(id));
        };
        let status = task.state.status();
        if status.is_final() {
            let error = ErrorReply::field(
                ErrorKind::Conflict,
                "id",
                format!(
                    "task {id} is already {}; there is nothing to cancel",
                    status.as_str()
                ),
            );
            return self.refuse(reply, error);
        }
        if let Some(running) = self.running.get_mut(&id) {
            // A cancel wins over a shutdown in progress: the task must not be requeued.
            running.stop = Some(StopReason::Cancel);
            running.token.cancel();
            self.cancel_waiters.entry(id).or_default().push(reply);
            return Ok(format!("task {id}: stopping its running attempt"));
        }
        self.cancel_waiting(id);
        let task = snapshot_of(&self.tasks, id);
        self.after_commit(move |result| {
            let _ = reply.send(result.map(|()| task).map_err(internal));
        });
        Ok(format!("task {id} cancelled"))
    }

    /// Cancels a task that is not running (waiting, queued or between attempts).
    pub(super) fn cancel_waiting(&mut self, id: TaskId) {
        self.transition(
            id,
            TaskState::Cancelled { at: Utc::now() },
            EventKind::Cancelled,
        );
        self.fail_dependants(id);
    }

    /// Queues a finished task again; returns the outcome for the audit log.
    pub(super) fn retry(&mut self, id: TaskId, reply: Reply<Task>) -> Outcome {
        let Some(task) = self.tasks.get(&id) else {
            return self.refuse(reply, not_found(id));
        };
        let status = task.state.status();
        if !status.is_final() || status == TaskStatus::Succeeded {
            let error = ErrorReply::field(
                ErrorKind::Conflict,
                "id",
                format!(
                    "task {id} is {}; only failed, cancelled or dependency_failed tasks can be retried",
                    status.as_str()
                ),
            );
            return self.refuse(reply, error);
        }
        if let Some(step) = &task.spec.workflow {
            let workflow = self.workflows.get(&step.workflow).map(|w| w.state.status());
            if workflow != Some(orch_protocol::WorkflowStatus::Running) {
                let error = ErrorReply::field(
                    ErrorKind::Conflict,
                    "id",
                    format!(
                        "task {id} is step `{}` of workflow {}, which is {}: roll the workflow back or submit it again",
                        step.step,
                        step.workflow,
                        workflow.map_or("gone", |s| s.as_str())
                    ),
                );
                return self.refuse(reply, error);
            }
        }
        let state = self.initial_state(&task.spec.after, &task.spec.soft_after);
        if let TaskState::DependencyFailed { dependency, .. } = state {
            let error = ErrorReply::field(
                ErrorKind::Conflict,
                "id",
                format!(
                    "task {id} depends on task {dependency}, which did not succeed: retry that one first"
                ),
            );
            return self.refuse(reply, error);
        }
        self.requeue(id, state);
        self.revive_dependants(id);
        let task = snapshot_of(&self.tasks, id);
        self.after_commit(move |result| {
            let _ = reply.send(result.map(|()| task).map_err(internal));
        });
        Ok(format!("task {id} queued again"))
    }

    /// Refuses a request; returns the outcome for the audit log. The error was decided
    /// from the in-memory state, so it is answered once that state (and the request's
    /// audit entry) is durable: a client never sees, say, "already succeeded" before it is
    /// true on disk.
    pub(super) fn refuse<T: Send + 'static>(
        &mut self,
        reply: Reply<T>,
        error: ErrorReply,
    ) -> Outcome {
        let outcome = Err(error.message.clone());
        self.after_commit(move |_| {
            let _ = reply.send(Err(error));
        });
        outcome
    }

    /// Puts a finished task back in `state` with a fresh retry budget.
    fn requeue(&mut self, id: TaskId, state: TaskState) {
        let task = self.tasks.get_mut(&id).expect("known task");
        task.attempts_before_retry = task.attempts.len() as u32;
        self.transition(id, state, EventKind::Retried);
        let task = snapshot_of(&self.tasks, id);
        self.enter(&task);
    }

    /// Tasks that were failed because `root` failed go back to waiting for it.
    fn revive_dependants(&mut self, root: TaskId) {
        let mut revived: Vec<TaskId> = self
            .tasks
            .values()
            .filter(|t| {
                matches!(t.state, TaskState::DependencyFailed { dependency, .. } if dependency == root)
            })
            .map(|t| t.id)
            .collect();
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

    pub(super) fn exited(&mut self, id: TaskId, attempt: u32, outcome: AttemptOutcome) {
        let Some(running) = self.running.remove(&id) else {
            return;
        };
        self.release_workflow_slot(id);
        debug_assert_eq!(running.attempt, attempt);
        let outcome = match running.stop {
            Some(StopReason::Cancel) if !outcome.is_success() => AttemptOutcome::Cancelled,
            Some(StopReason::Shutdown) if !outcome.is_success() => AttemptOutcome::Interrupted,
            _ => outcome,
        };
        self.finish_attempt(id, outcome.clone());
        if running.stop == Some(StopReason::Shutdown) && !outcome.is_success() {
            // A graceful stop is not the task's fault: requeue without using a retry.
            let task = self.tasks.get_mut(&id).expect("known task");
            task.attempts_before_retry += 1;
            self.transition(
                id,
                TaskState::Queued { since: Utc::now() },
                EventKind::Queued,
            );
        } else {
            self.settle_attempt(id, attempt, outcome);
        }
        let waiters = self.cancel_waiters.remove(&id).unwrap_or_default();
        if !waiters.is_empty() {
            let task = snapshot_of(&self.tasks, id);
            self.after_commit(move |result| {
                for reply in waiters {
                    let answer = result.map(|()| task.clone()).map_err(internal);
                    let _ = reply.send(answer);
                }
            });
        }
    }

    /// Records the outcome on the task's last attempt.
    pub(super) fn finish_attempt(&mut self, id: TaskId, outcome: AttemptOutcome) {
        let task = self.tasks.get_mut(&id).expect("known task");
        if let Some(last) = task.attempts.last_mut() {
            last.finished_at = Some(Utc::now());
            last.outcome = Some(outcome);
        }
    }

    /// Moves a task whose attempt ended to its next state: succeeded, retry, or failed.
    pub(super) fn settle_attempt(&mut self, id: TaskId, attempt: u32, outcome: AttemptOutcome) {
        let now = Utc::now();
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
            let retry_at = after(delay);
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
            self.pending.timers.push((id, next_attempt, delay));
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

    /// After `id` succeeded: dependants waiting only on it become ready.
    fn release_dependants(&mut self, id: TaskId) {
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
            self.transition(
                dependant,
                TaskState::Queued { since: Utc::now() },
                EventKind::Queued,
            );
            let priority = self.tasks[&dependant].spec.priority;
            self.ready.push(priority, dependant);
        } else {
            let task = self.tasks.get_mut(&dependant).expect("known task");
            task.state = TaskState::Blocked { waiting_on: rest };
            let write = TaskWrite {
                task: task.clone(),
                previous: Some(TaskStatus::Blocked),
            };
            self.pending.batch.tasks.push(write);
        }
    }

    /// After `root` failed for good: everything that needs it (a hard dependency), directly
    /// or not, fails with `dependency_failed` naming `root`; what only waits for it to
    /// finish (a soft dependency) is released.
    fn fail_dependants(&mut self, root: TaskId) {
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
                        at: Utc::now(),
                        dependency: root,
                    },
                    EventKind::DependencyFailed { dependency: root },
                );
                stack.push(dependant);
            }
        }
    }

    /// Records a task's progress in memory; it is written (the latest value only) by
    /// [`Engine::flush_progress`] or with the task's next change.
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

    /// An attempt could not start for lack of system resources: unless it was being
    /// stopped anyway, it is not counted, and the task waits a short delay to try it again.
    pub(super) fn not_started(&mut self, id: TaskId, attempt: u32, reason: String) {
        let Some(running) = self.running.get(&id) else {
            return;
        };
        if running.stop.is_some() {
            // A cancel or a shutdown came first: the attempt ends as they make it end.
            return self.exited(id, attempt, AttemptOutcome::SpawnFailed { error: reason });
        }
        self.running.remove(&id);
        self.release_workflow_slot(id);
        let task = self.tasks.get_mut(&id).expect("known task");
        if task.attempts.last().is_some_and(|a| a.number == attempt) {
            task.attempts.pop();
        }
        let retry_at = after(START_RETRY_DELAY);
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
        self.pending.timers.push((id, attempt, START_RETRY_DELAY));
    }

    pub(super) fn retry_due(&mut self, id: TaskId, attempt: u32) {
        let Some(task) = self.tasks.get(&id) else {
            return;
        };
        if !matches!(task.state, TaskState::RetryWaiting { next_attempt, .. } if next_attempt == attempt)
        {
            return;
        }
        let priority = task.spec.priority;
        self.transition(
            id,
            TaskState::Queued { since: Utc::now() },
            EventKind::Queued,
        );
        self.ready.push(priority, id);
    }
}

fn not_found(id: TaskId) -> ErrorReply {
    ErrorReply::field(ErrorKind::NotFound, "id", format!("there is no task {id}"))
}

/// A store failure as an error answer.
pub(super) fn internal(e: &crate::store::StoreError) -> ErrorReply {
    ErrorReply::new(ErrorKind::Internal, e.to_string())
}
