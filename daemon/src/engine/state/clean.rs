//! Removing finished tasks and workflows (`orch clean` and the daemon's retention): the
//! records [`retention::select`] chooses among the tasks held in memory and the finished
//! ones the store's status index gives, their logs once the removal is durable.

use std::collections::HashMap;

use orch_protocol::{Actor, ErrorKind, ErrorReply, EventKind, Task, TaskId, TaskStatus};

use super::retention::{self, Rule, Selection, Tasks};
use super::{EngineState, Outcome, Reply};

impl EngineState {
    /// Removes what `rule` selects (see [`retention`]) and records the request in the
    /// audit log (a retention run only when it removed something).
    pub(super) fn clean(&mut self, actor: Actor, rule: Rule, reply: Reply<Selection>) {
        let params = serde_json::to_value(&rule).expect("rules serialize");
        let quiet = rule.retention;
        let (outcome, removed) = self.remove(rule, reply);
        if removed > 0 || !quiet {
            self.audit(actor, "clean", params, outcome);
        }
    }

    /// Removes what `rule` selects; the outcome and how many records went.
    fn remove(&mut self, rule: Rule, reply: Reply<Selection>) -> (Outcome, usize) {
        if let Some(status) = rule.status.iter().find(|s| !s.is_final()) {
            let error = ErrorReply::field(
                ErrorKind::BadRequest,
                "status",
                format!(
                    "only finished tasks can be removed, and `{}` is not a final state",
                    status.as_str()
                ),
            );
            return (self.refuse(reply, error), 0);
        }
        let mut stored = self.stored_candidates(&rule);
        let tasks = Tasks {
            held: &self.tasks,
            stored: &stored,
        };
        let selection = retention::select(&tasks, &self.workflows, &rule, self.now);
        for id in &selection.tasks {
            self.log_event(*id, EventKind::Removed);
            let task = match self.tasks.remove(id) {
                Some(task) => task,
                None => stored.remove(id).expect("selected from the candidates"),
            };
            self.step.batch.removals.push(task);
        }
        for id in &selection.workflows {
            self.log_workflow_event(*id, EventKind::Removed);
            self.workflows.remove(id);
            self.workflow_running.remove(id);
            self.deferred.remove(id);
            self.step.batch.workflow_removals.push(*id);
        }
        let mut outcome = format!("removed {} tasks", selection.tasks.len());
        if !selection.workflows.is_empty() {
            outcome += &format!(" and {} workflows", selection.workflows.len());
        }
        self.step.effects.removed_logs.extend(&selection.tasks);
        let removed = selection.len();
        self.answer(reply, Ok(selection));
        (Ok(outcome), removed)
    }

    /// The finished tasks outside workflows that the store holds and memory does not,
    /// read one at a time from the status index; only those that may go or that keep what
    /// they depend on are kept (see [`retention::may_matter`]). The stashed ones (not held
    /// in memory, never removed) are read too: what they depend on stays.
    fn stored_candidates(&self, rule: &Rule) -> HashMap<TaskId, Task> {
        let mut stored = HashMap::new();
        let read = |s: &TaskStatus| s.is_final() || *s == TaskStatus::Stashed;
        for status in TaskStatus::ALL.into_iter().filter(read) {
            self.records.each_in(status, &mut |task: Task| {
                if task.spec.workflow.is_none()
                    && !self.tasks.contains_key(&task.id)
                    && retention::may_matter(&task, rule, self.now)
                {
                    stored.insert(task.id, task);
                }
            });
        }
        stored
    }
}
