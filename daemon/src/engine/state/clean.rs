//! Removing finished tasks (`orch clean`): the records in the batch, their logs once
//! the removal is durable.

use std::collections::HashSet;

use orch_protocol::{CleanFilter, ErrorKind, ErrorReply, EventKind, TaskId};

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
        let ids = self.removable(&filter);
        for id in &ids {
            let task = self.tasks.remove(id).expect("selected from the map");
            self.step.batch.removals.push(task);
            self.log_event(*id, EventKind::Removed);
        }
        let outcome = Ok(format!("removed {} tasks", ids.len()));
        self.step.effects.removed_logs.extend(&ids);
        self.answer(reply, Ok(ids));
        outcome
    }

    /// The selected finished tasks that no kept task depends on (hard or soft), oldest
    /// first. Workflow steps and compensations stay: their workflow's record refers to
    /// them and a later rollback needs their outcome.
    fn removable(&self, filter: &CleanFilter) -> Vec<TaskId> {
        let cutoff = filter
            .older_than_ms
            .and_then(|ms| chrono::Duration::try_milliseconds(ms.min(i64::MAX as u64) as i64))
            .and_then(|age| self.now.checked_sub_signed(age));
        let mut selected: HashSet<TaskId> = self
            .tasks
            .values()
            .filter(|t| t.spec.workflow.is_none())
            .filter(|t| {
                let Some(finished) = t.state.finished_at() else {
                    return false;
                };
                (filter.status.is_empty() || filter.status.contains(&t.state.status()))
                    && cutoff.is_none_or(|c| finished <= c)
            })
            .map(|t| t.id)
            .collect();
        // Keeping one task keeps what it depends on, which may keep more: repeat until
        // nothing changes.
        loop {
            let needed: HashSet<TaskId> = self
                .tasks
                .values()
                .filter(|t| !selected.contains(&t.id))
                .flat_map(|t| t.spec.after.iter().chain(&t.spec.soft_after).copied())
                .collect();
            let before = selected.len();
            selected.retain(|id| !needed.contains(id));
            if selected.len() == before {
                break;
            }
        }
        let mut ids: Vec<TaskId> = selected.into_iter().collect();
        ids.sort_unstable();
        ids
    }
}
