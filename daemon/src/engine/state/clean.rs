//! Removing finished tasks (`orch clean`): selected from memory and from the store's
//! status index (one predicate, [`is_selected`]), the records in the batch, their logs
//! once the removal is durable.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use orch_protocol::{CleanFilter, ErrorKind, ErrorReply, EventKind, Task, TaskId, TaskStatus};

use super::{EngineState, Outcome, Reply};

impl EngineState {
    /// Removes the finished tasks `filter` selects, except those a kept task depends on
    /// (a retry of the kept task needs them); returns the outcome for the audit log.
    pub(super) fn clean(&mut self, filter: CleanFilter, reply: Reply<Vec<TaskId>>) -> Outcome {
        if let Some(status) = filter.status.iter().find(|s| !s.is_final()) {
            let error = ErrorReply::field(
                ErrorKind::BadRequest,
                "status",
                format!(
                    "only finished tasks can be removed, and `{}` is not a final state",
                    status.as_str()
                ),
            );
            return self.refuse(reply, error);
        }
        let mut chosen = self.removable(&filter);
        let mut ids: Vec<TaskId> = chosen.keys().copied().collect();
        ids.sort_unstable();
        for id in &ids {
            let task = match self.tasks.remove(id) {
                Some(task) => task,
                None => chosen.remove(id).expect("selected above"),
            };
            self.step.batch.removals.push(task);
            self.log_event(*id, EventKind::Removed);
        }
        let outcome = Ok(format!("removed {} tasks", ids.len()));
        self.step.effects.removed_logs.extend(&ids);
        self.answer(reply, Ok(ids));
        outcome
    }

    /// The selected finished tasks that no kept task depends on (hard or soft), by id
    /// (with the record of those read from the store). The candidates are the finished
    /// tasks held in memory and those in the store's status index; workflow steps and
    /// compensations stay (their workflow's record refers to them and a later rollback
    /// needs their outcome). A queued task's dependencies are not known without reading
    /// it, and need not be kept: they all finished (its hard ones succeeded), and that is
    /// what a later retry of it finds when they are gone.
    fn removable(&self, filter: &CleanFilter) -> HashMap<TaskId, Task> {
        let cutoff = filter
            .older_than_ms
            .and_then(|ms| chrono::Duration::try_milliseconds(ms.min(i64::MAX as u64) as i64))
            .and_then(|age| self.now.checked_sub_signed(age));
        let mut selected: HashMap<TaskId, Task> = HashMap::new();
        let mut needed: HashSet<TaskId> = HashSet::new();
        let mut consider = |task: Task| {
            if is_selected(filter, cutoff, &task) {
                selected.insert(task.id, task);
            } else {
                needed.extend(task.spec.after.iter().chain(&task.spec.soft_after));
            }
        };
        for task in self.tasks.values() {
            consider(task.clone());
        }
        for status in TaskStatus::ALL.into_iter().filter(|s| s.is_final()) {
            self.records.each_in(status, &mut |task: Task| {
                if !self.tasks.contains_key(&task.id) {
                    consider(task);
                }
            });
        }
        // Keeping one task keeps what it depends on, which may keep more: repeat until
        // nothing changes.
        loop {
            let kept: Vec<TaskId> = selected
                .keys()
                .filter(|id| needed.contains(id))
                .copied()
                .collect();
            if kept.is_empty() {
                break;
            }
            for id in kept {
                let task = selected.remove(&id).expect("listed above");
                needed.extend(task.spec.after.iter().chain(&task.spec.soft_after));
            }
        }
        selected
    }
}

/// Whether `orch clean` with `filter` selects `task` (before what kept tasks depend on is
/// taken back): a finished task outside workflows, in one of the filter's states, that
/// finished at or before `cutoff`.
fn is_selected(filter: &CleanFilter, cutoff: Option<DateTime<Utc>>, task: &Task) -> bool {
    let Some(finished) = task.state.finished_at() else {
        return false;
    };
    task.spec.workflow.is_none()
        && (filter.status.is_empty() || filter.status.contains(&task.state.status()))
        && cutoff.is_none_or(|c| finished <= c)
}
